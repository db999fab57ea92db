package persistence

import (
	"context"
	"errors"
	"strings"
	"time"
)

// SQLite has one writer at a time. A writer that finds the database locked
// waits in SQLite's busy handler, which sleeps 1, 2, 5, 10, … up to 100 ms
// between tries: under a few concurrent writers most of a write's time is
// spent asleep while the lock is free. The writeGate makes the process's
// writers queue in Go instead: a transaction (every one begins IMMEDIATE,
// so every one writes) holds the gate from BEGIN to COMMIT or ROLLBACK, a
// writing statement outside one for its execution; reads do not take it
// (WAL readers never wait). The busy handler remains for writers of other
// processes.
type writeGate struct{ ch chan struct{} }

func newWriteGate() *writeGate { return &writeGate{ch: make(chan struct{}, 1)} }

// gateWait bounds the wait for the gate, as busy_timeout bounds SQLite's.
const gateWait = 10 * time.Second

// errGateBusy says the gate stayed closed for gateWait; like SQLITE_BUSY it
// is transient (see transient).
var errGateBusy = errors.New("persistence: database is locked (waited for the write gate)")

// acquire takes the gate, waiting until it is free, ctx ends or gateWait
// passed.
func (g *writeGate) acquire(ctx context.Context) error {
	select {
	case g.ch <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(gateWait)
	defer t.Stop()
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errGateBusy
	}
}

func (g *writeGate) release() { <-g.ch }

// writes reports whether a query (run as a query, not an exec) may write:
// INSERT, UPDATE, DELETE or REPLACE, as with RETURNING, after any leading
// comments (River's statements begin with their name in one).
func writes(query string) bool {
	q := withoutLeadingComments(query)
	if len(q) < 7 {
		return false
	}
	switch strings.ToUpper(q[:6]) {
	case "INSERT", "UPDATE", "DELETE":
		return true
	}
	return strings.EqualFold(q[:7], "REPLACE")
}

// withoutLeadingComments is q from its first token on: without the spaces,
// "--" line comments and "/* */" comments before it.
func withoutLeadingComments(q string) string {
	for {
		q = strings.TrimSpace(q)
		switch {
		case strings.HasPrefix(q, "--"):
			_, rest, ok := strings.Cut(q, "\n")
			if !ok {
				return ""
			}
			q = rest
		case strings.HasPrefix(q, "/*"):
			_, rest, ok := strings.Cut(q[2:], "*/")
			if !ok {
				return ""
			}
			q = rest
		default:
			return q
		}
	}
}
