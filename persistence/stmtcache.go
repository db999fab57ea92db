package persistence

import (
	"container/list"
	"context"
	"database/sql/driver"
	"strings"
)

// stmtCache keeps one connection's prepared statements by their text, so
// that a statement the process runs again and again is compiled once per
// connection rather than every time (SQLite: parsing and planning a
// statement cost more than running a small one). It is bounded (least
// recently used statements are closed first) and used by one goroutine at a
// time, like its connection. A statement whose rows are still open is busy:
// running the same text meanwhile — a query inside the loop over its own
// rows — prepares a statement of its own for that run.
type stmtCache struct {
	max   int
	bySQL map[string]*list.Element
	order list.List // of *cachedStmt, most recently used first
}

type cachedStmt struct {
	sql  string
	stmt driver.Stmt
	busy bool
}

func newStmtCache(max int) *stmtCache {
	return &stmtCache{max: max, bySQL: map[string]*list.Element{}}
}

// cacheable says whether query is worth keeping: one statement (the
// driver runs a script by parsing it piece by piece anyway), not a
// transaction's control statement.
func cacheable(query string) bool {
	q := strings.TrimSpace(query)
	if strings.Contains(strings.TrimSuffix(q, ";"), ";") {
		return false
	}
	head := strings.ToUpper(q[:min(len(q), 8)])
	return !strings.HasPrefix(head, "BEGIN") && !strings.HasPrefix(head, "COMMIT") &&
		!strings.HasPrefix(head, "ROLLBACK") && !strings.HasPrefix(head, "PRAGMA")
}

// take returns query's statement, prepared on conn if it is not cached or
// busy, and marks it busy; give it back with put. owned says the caller
// must close it (it is not in the cache).
func (c *stmtCache) take(ctx context.Context, conn driver.Conn, query string) (st *cachedStmt, owned bool, err error) {
	if e, ok := c.bySQL[query]; ok {
		cs := e.Value.(*cachedStmt)
		if !cs.busy {
			c.order.MoveToFront(e)
			cs.busy = true
			return cs, false, nil
		}
	}
	stmt, err := prepare(ctx, conn, steadyLimits(query))
	if err != nil {
		return nil, false, err
	}
	cs := &cachedStmt{sql: query, stmt: stmt, busy: true}
	if _, ok := c.bySQL[query]; ok {
		return cs, true, nil // the cached one is busy
	}
	c.bySQL[query] = c.order.PushFront(cs)
	for c.order.Len() > c.max {
		last := c.order.Back()
		old := last.Value.(*cachedStmt)
		if old.busy {
			break // in use: closed when the cache shrinks next
		}
		c.order.Remove(last)
		delete(c.bySQL, old.sql)
		_ = old.stmt.Close()
	}
	return cs, false, nil
}

// put gives back a statement take returned.
func (c *stmtCache) put(cs *cachedStmt, owned bool) {
	if owned {
		_ = cs.stmt.Close()
		return
	}
	cs.busy = false
}

// close closes every cached statement (before its connection closes).
func (c *stmtCache) close() {
	for e := c.order.Front(); e != nil; e = e.Next() {
		_ = e.Value.(*cachedStmt).stmt.Close()
	}
	c.order.Init()
	clear(c.bySQL)
}

// steadyLimits is query with every LIMIT whose count is a bound parameter
// (?, ?NNN, :name, @name, $name) written LIMIT +? instead: the same count,
// but one SQLite's planner does not read. SQLite (3.47 and later) plans
// LIMIT ? with the value bound when the statement is prepared, and so marks
// the statement expired whenever that parameter is bound again: each run of
// a cached statement with LIMIT ? was parsed and planned anew, as if it had
// not been cached. River's fetch of available jobs is such a statement, run
// at least once a turn (about 100 µs of re-preparing each time, four times
// its run). A unary plus is an expression SQLite does not look into. Quoted
// text and comments are left as they are.
func steadyLimits(query string) string {
	var sb strings.Builder
	last := 0 // query[last:] is not yet in sb
	for i := 0; i < len(query); i++ {
		switch c := query[i]; {
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end := byte(c)
			if c == '[' {
				end = ']'
			}
			j := strings.IndexByte(query[i+1:], end)
			if j < 0 {
				i = len(query)
			} else {
				i += j + 1 // a doubled quote is two quoted stretches
			}
		case c == '-' && strings.HasPrefix(query[i:], "--"):
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			i += j
		case c == '/' && strings.HasPrefix(query[i:], "/*"):
			j := strings.Index(query[i+2:], "*/")
			if j < 0 {
				i = len(query)
			} else {
				i += j + 3
			}
		case (c == 'L' || c == 'l') && len(query)-i > 5 && strings.EqualFold(query[i:i+5], "LIMIT") &&
			(i == 0 || !wordByte(query[i-1])):
			j := i + 5
			for j < len(query) && (query[j] == ' ' || query[j] == '\t' || query[j] == '\n' || query[j] == '\r') {
				j++
			}
			if j > i+5 && j < len(query) && strings.IndexByte("?:@$", query[j]) >= 0 {
				sb.WriteString(query[last:j])
				sb.WriteByte('+')
				last = j
			}
			i = j - 1
		case wordByte(c):
			for i+1 < len(query) && wordByte(query[i+1]) {
				i++
			}
		}
	}
	if last == 0 {
		return query
	}
	sb.WriteString(query[last:])
	return sb.String()
}

// wordByte says whether b can be part of an SQL word.
func wordByte(b byte) bool {
	return b == '_' || b == '$' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || b >= 0x80
}

// execCached runs query through its cached statement.
func (c *stmtCache) exec(ctx context.Context, conn driver.Conn, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, owned, err := c.take(ctx, conn, query)
	if err != nil {
		return nil, err
	}
	defer c.put(cs, owned)
	if e, ok := cs.stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	values, err := namedToValues(args)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 fallback for old drivers
	return cs.stmt.Exec(values)
}

// query runs query through its cached statement; the statement is busy
// until done is called (when its rows close).
func (c *stmtCache) query(ctx context.Context, conn driver.Conn, query string, args []driver.NamedValue) (rows driver.Rows, done func(), err error) {
	cs, owned, err := c.take(ctx, conn, query)
	if err != nil {
		return nil, nil, err
	}
	if q, ok := cs.stmt.(driver.StmtQueryContext); ok {
		rows, err = q.QueryContext(ctx, args)
	} else {
		var values []driver.Value
		if values, err = namedToValues(args); err == nil {
			//lint:ignore SA1019 fallback for old drivers
			rows, err = cs.stmt.Query(values)
		}
	}
	if err != nil {
		c.put(cs, owned)
		return nil, nil, err
	}
	return rows, func() { c.put(cs, owned) }, nil
}
