package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
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

// gatedConnector makes SQLite connections whose writers take the
// database's writeGate and which keep their prepared statements
// (stmtcache.go): SQLite only, under nulSafeConnector. Both are SQLite's
// costs — one writer at a time, and a statement parsed and planned each
// time it is not prepared (a quarter of the server's CPU in a turn
// without the cache) — and nothing PostgreSQL's driver needs (pgx keeps
// its own statements).
type gatedConnector struct {
	inner driver.Connector
	gate  *writeGate
	// stmts is how many prepared statements a connection keeps.
	stmts int
}

func (c gatedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: conn, gate: c.gate, stmts: newStmtCache(c.stmts)}, nil
}

func (c gatedConnector) Driver() driver.Driver { return c.inner.Driver() }

// gatedConn is a SQLite connection that holds the gate for each of its
// transactions and for each writing statement outside one. A connection is
// used by one goroutine at a time.
type gatedConn struct {
	driver.Conn
	gate  *writeGate
	inTx  bool // holds the gate for its transaction
	stmts *stmtCache
}

var (
	_ driver.ConnBeginTx        = (*gatedConn)(nil)
	_ driver.ConnPrepareContext = (*gatedConn)(nil)
	_ driver.ExecerContext      = (*gatedConn)(nil)
	_ driver.QueryerContext     = (*gatedConn)(nil)
	_ driver.Pinger             = (*gatedConn)(nil)
	_ driver.SessionResetter    = (*gatedConn)(nil)
	_ driver.Validator          = (*gatedConn)(nil)
	_ driver.NamedValueChecker  = (*gatedConn)(nil)
)

// enter takes the gate for a statement outside a transaction that writes;
// leave gives it back (nil: none was taken). run is the context to run the
// statement with: uninterrupted for one that holds the gate.
func (c *gatedConn) enter(ctx context.Context, write bool) (run context.Context, leave func(), err error) {
	switch {
	case c.inTx:
		run, err = uninterrupted(ctx)
		return run, nil, err
	case !write:
		return ctx, nil, nil
	}
	if err := c.gate.acquire(ctx); err != nil {
		return nil, nil, err
	}
	if run, err = uninterrupted(ctx); err != nil {
		c.gate.release()
		return nil, nil, err
	}
	return run, c.gate.release, nil
}

// uninterrupted is the context a SQLite statement that holds the write
// gate runs with: ctx's values without its cancellation, once ctx is
// checked. The driver watches a cancellable context with a goroutine of
// its own for every statement (to interrupt it), woken when the statement
// ends — most of them the run log's writes. A writer's statement is short
// and its lock waits are the gate's, which do watch ctx; stopping it
// midway would only fail a transaction its caller rolls back anyway.
// Reads, which can be long (a listing), keep the driver's interruption.
func uninterrupted(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

func (c *gatedConn) Close() error {
	c.stmts.close()
	if c.inTx {
		c.inTx = false
		c.gate.release()
	}
	return c.Conn.Close()
}

func (c *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	// SQLite transactions begin IMMEDIATE: each one is a writer.
	if err := c.gate.acquire(ctx); err != nil {
		return nil, err
	}
	run, err := uninterrupted(ctx)
	if err != nil {
		c.gate.release()
		return nil, err
	}
	var tx driver.Tx
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(run, opts)
	} else {
		//lint:ignore SA1019 fallback for drivers without BeginTx
		tx, err = c.Conn.Begin()
	}
	if err != nil {
		c.gate.release()
		return nil, err
	}
	c.inTx = true
	return &gatedTx{inner: tx, conn: c}, nil
}

func (c *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := prepare(ctx, c.Conn, query)
	if err != nil {
		return nil, err
	}
	return &gatedStmt{Stmt: st, conn: c, writes: writes(query)}, nil
}

func (c *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.Conn.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	run, leave, err := c.enter(ctx, true)
	if err != nil {
		return nil, err
	}
	if leave != nil {
		defer leave()
	}
	if cacheable(query) {
		return c.stmts.exec(run, c.Conn, query, args)
	}
	return e.ExecContext(run, query, args)
}

func (c *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.Conn.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	run, leave, err := c.enter(ctx, writes(query))
	if err != nil {
		return nil, err
	}
	if cacheable(query) {
		rows, release, err := c.stmts.query(run, c.Conn, query, args)
		if err != nil {
			return gatedRows(nil, err, leave)
		}
		return &rowsLeaving{inner: rows, leave: func() {
			release()
			if leave != nil {
				leave()
			}
		}}, nil
	}
	rows, err := q.QueryContext(run, query, args)
	return gatedRows(rows, err, leave)
}

func (c *gatedConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *gatedConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *gatedConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *gatedConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// gatedTx gives the gate back when its transaction ends.
type gatedTx struct {
	inner driver.Tx
	conn  *gatedConn
}

func (t *gatedTx) Commit() error {
	defer t.end()
	return t.inner.Commit()
}

func (t *gatedTx) Rollback() error {
	defer t.end()
	return t.inner.Rollback()
}

func (t *gatedTx) end() {
	if t.conn.inTx {
		t.conn.inTx = false
		t.conn.gate.release()
	}
}

// gatedStmt is a prepared statement of a gatedConn.
type gatedStmt struct {
	driver.Stmt
	conn   *gatedConn
	writes bool
}

func (s *gatedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	run, leave, err := s.conn.enter(ctx, true)
	if err != nil {
		return nil, err
	}
	if leave != nil {
		defer leave()
	}
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(run, args)
	}
	values, err := namedToValues(args)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 fallback for old drivers
	return s.Stmt.Exec(values)
}

func (s *gatedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	run, leave, err := s.conn.enter(ctx, s.writes)
	if err != nil {
		return nil, err
	}
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		rows, err := q.QueryContext(run, args)
		return gatedRows(rows, err, leave)
	}
	values, err := namedToValues(args)
	if err != nil {
		return gatedRows(nil, err, leave)
	}
	//lint:ignore SA1019 fallback for old drivers
	rows, err := s.Stmt.Query(values)
	return gatedRows(rows, err, leave)
}

func (s *gatedStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.Stmt.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}

// gatedRows are rows whose Close gives back the gate their query took
// (leave); rows of a query that took none are returned as they are.
func gatedRows(rows driver.Rows, err error, leave func()) (driver.Rows, error) {
	switch {
	case leave == nil:
		return rows, err
	case err != nil:
		leave()
		return nil, err
	}
	return &rowsLeaving{inner: rows, leave: leave}, nil
}

// rowsLeaving calls leave once, when its rows close; the rest is the
// driver's rows'.
type rowsLeaving struct {
	inner driver.Rows
	leave func()
}

var (
	_ driver.RowsColumnTypeScanType         = (*rowsLeaving)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*rowsLeaving)(nil)
	_ driver.RowsColumnTypeNullable         = (*rowsLeaving)(nil)
)

func (r *rowsLeaving) Columns() []string              { return r.inner.Columns() }
func (r *rowsLeaving) Next(dest []driver.Value) error { return r.inner.Next(dest) }

func (r *rowsLeaving) Close() error {
	err := r.inner.Close()
	if r.leave != nil {
		r.leave()
		r.leave = nil
	}
	return err
}

func (r *rowsLeaving) ColumnTypeScanType(i int) reflect.Type {
	if c, ok := r.inner.(driver.RowsColumnTypeScanType); ok {
		return c.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *rowsLeaving) ColumnTypeDatabaseTypeName(i int) string {
	if c, ok := r.inner.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return c.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *rowsLeaving) ColumnTypeNullable(i int) (nullable, ok bool) {
	if c, ok := r.inner.(driver.RowsColumnTypeNullable); ok {
		return c.ColumnTypeNullable(i)
	}
	return false, false
}

// prepare prepares query on conn.
func prepare(ctx context.Context, conn driver.Conn, query string) (driver.Stmt, error) {
	if p, ok := conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return conn.Prepare(query)
}
