package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
)

// nulSafeConnector wraps a database/sql connector so that every text value
// crossing it is escaped on the way in and unescaped on the way out (see
// escapeText): string and []byte arguments of every statement, and the
// values of driver.Valuer arguments (jsonCol) that are text; string and
// []byte column values of every row. It is the one place persistence
// writes and reads text and JSON, so gorm models, raw SQL and migrations
// all store NUL characters the same way on both drivers, and callers never
// see the escape.
//
// On SQLite it also carries the database's writeGate (sqlitegate.go): the
// process's writers queue in it instead of in SQLite's busy handler.
//
// On SQLite each connection also keeps its prepared statements
// (stmtcache.go); PostgreSQL's driver (pgx) keeps its own.
type nulSafeConnector struct {
	inner driver.Connector
	gate  *writeGate // nil: no gate (PostgreSQL)
	// stmts is how many prepared statements a connection keeps (0: none).
	stmts int
}

func (c nulSafeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	nc := &nulSafeConn{inner: conn, gate: c.gate}
	if c.stmts > 0 {
		nc.stmts = newStmtCache(c.stmts)
	}
	return nc, nil
}

func (c nulSafeConnector) Driver() driver.Driver { return c.inner.Driver() }

// dsnConnector is the connector of a driver without one of its own.
type dsnConnector struct {
	dsn string
	drv driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// escapeArgs escapes the text arguments of a statement in place (args is
// database/sql's own copy).
func escapeArgs(args []driver.NamedValue) error {
	for i := range args {
		v, err := escapeValue(args[i].Value)
		if err != nil {
			return err
		}
		args[i].Value = v
	}
	return nil
}

func escapeValue(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return escapeText(x), nil
	case []byte:
		return escapeText(x), nil
	case driver.Valuer:
		// Drivers that take any value (pgx) receive Valuers unconverted.
		// A text value is escaped; any other is left for the driver.
		if rv := reflect.ValueOf(x); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return v, nil
		}
		inner, err := x.Value()
		if err != nil {
			return nil, err
		}
		switch t := inner.(type) {
		case string:
			if needsEscape(t) {
				return escapeText(t), nil
			}
		case []byte:
			if needsEscape(t) {
				return escapeText(t), nil
			}
		}
	}
	return v, nil
}

func namedToValues(args []driver.NamedValue) ([]driver.Value, error) {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, errors.New("persistence: the driver does not support named parameters")
		}
		out[i] = a.Value
	}
	return out, nil
}

type nulSafeConn struct {
	inner driver.Conn
	gate  *writeGate
	inTx  bool       // holds the gate for its transaction (a conn is used by one goroutine at a time)
	stmts *stmtCache // nil: statements are prepared each time
}

var (
	_ driver.Conn               = (*nulSafeConn)(nil)
	_ driver.ConnBeginTx        = (*nulSafeConn)(nil)
	_ driver.ConnPrepareContext = (*nulSafeConn)(nil)
	_ driver.ExecerContext      = (*nulSafeConn)(nil)
	_ driver.QueryerContext     = (*nulSafeConn)(nil)
	_ driver.Pinger             = (*nulSafeConn)(nil)
	_ driver.SessionResetter    = (*nulSafeConn)(nil)
	_ driver.Validator          = (*nulSafeConn)(nil)
	_ driver.NamedValueChecker  = (*nulSafeConn)(nil)
)

func (c *nulSafeConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *nulSafeConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.inner.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &nulSafeStmt{inner: st, conn: c.inner, owner: c, writes: writes(query)}, nil
}

func (c *nulSafeConn) Close() error {
	if c.stmts != nil {
		c.stmts.close()
	}
	if c.inTx {
		c.inTx = false
		c.gate.release()
	}
	return c.inner.Close()
}

// enter takes the write gate for a statement outside a transaction that
// writes; leave gives it back. run is the context to run the statement
// with: uninterrupted for one that holds the gate.
func (c *nulSafeConn) enter(ctx context.Context, write bool) (run context.Context, leave func(), err error) {
	if c.gate == nil || (!c.inTx && !write) {
		return ctx, func() {}, nil
	}
	if !c.inTx {
		if err := c.gate.acquire(ctx); err != nil {
			return nil, nil, err
		}
		leave = c.gate.release
	} else {
		leave = func() {}
	}
	if run, err = uninterrupted(ctx); err != nil {
		leave()
		return nil, nil, err
	}
	return run, leave, nil
}

// uninterrupted is the context a SQLite statement that holds the write
// gate runs with: ctx's values without its cancellation, once ctx is
// checked. The driver watches a cancellable context with a goroutine of
// its own for every statement (to interrupt it), woken when the statement
// ends — some 150 a 12-step turn, most of them the run log's writes, and
// ~10 % of SQLite's CPU in W2 and W3. A writer's statement is short and
// its lock waits are the gate's, which do watch ctx; stopping it midway
// would only fail a transaction its caller rolls back anyway. Reads, which
// can be long (a listing), keep the driver's interruption.
func uninterrupted(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// Begin is part of driver.Conn; database/sql calls BeginTx.
func (c *nulSafeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *nulSafeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.gate == nil {
		return c.beginTx(ctx, opts)
	}
	// SQLite transactions begin IMMEDIATE: each one is a writer.
	if err := c.gate.acquire(ctx); err != nil {
		return nil, err
	}
	run, err := uninterrupted(ctx)
	if err != nil {
		c.gate.release()
		return nil, err
	}
	tx, err := c.beginTx(run, opts)
	if err != nil {
		c.gate.release()
		return nil, err
	}
	c.inTx = true
	return &gatedTx{inner: tx, conn: c}, nil
}

func (c *nulSafeConn) beginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	if opts.Isolation != 0 || opts.ReadOnly {
		return nil, errors.New("persistence: the driver does not support transaction options")
	}
	//lint:ignore SA1019 fallback for drivers without BeginTx
	return c.inner.Begin()
}

// gatedTx gives the write gate back when its transaction ends.
type gatedTx struct {
	inner driver.Tx
	conn  *nulSafeConn
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

func (c *nulSafeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := escapeArgs(args); err != nil {
		return nil, err
	}
	ctx, leave, err := c.enter(ctx, true)
	if err != nil {
		return nil, err
	}
	defer leave()
	if c.stmts != nil && cacheable(query) {
		return c.stmts.exec(ctx, c.inner, query, args)
	}
	switch e := c.inner.(type) {
	case driver.ExecerContext:
		return e.ExecContext(ctx, query, args)
	//lint:ignore SA1019 fallback for old drivers
	case driver.Execer:
		values, err := namedToValues(args)
		if err != nil {
			return nil, err
		}
		return e.Exec(query, values)
	}
	return nil, driver.ErrSkip // database/sql prepares a statement instead
}

func (c *nulSafeConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := escapeArgs(args); err != nil {
		return nil, err
	}
	ctx, leave, err := c.enter(ctx, writes(query))
	if err != nil {
		return nil, err
	}
	var rows driver.Rows
	if c.stmts != nil && cacheable(query) {
		rows, release, err := c.stmts.query(ctx, c.inner, query, args)
		if err != nil {
			leave()
			return nil, err
		}
		return &nulSafeRows{inner: rows, done: func() { release(); leave() }}, nil
	}
	switch q := c.inner.(type) {
	case driver.QueryerContext:
		rows, err = q.QueryContext(ctx, query, args)
	//lint:ignore SA1019 fallback for old drivers
	case driver.Queryer:
		var values []driver.Value
		if values, err = namedToValues(args); err == nil {
			rows, err = q.Query(query, values)
		}
	default:
		leave()
		return nil, driver.ErrSkip
	}
	if err != nil {
		leave()
		return nil, err
	}
	return &nulSafeRows{inner: rows, done: leave}, nil
}

func (c *nulSafeConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *nulSafeConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *nulSafeConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *nulSafeConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip // database/sql's default conversion
}

type nulSafeStmt struct {
	inner  driver.Stmt
	conn   driver.Conn // whose NamedValueChecker applies when the statement has none
	owner  *nulSafeConn
	writes bool // the statement writes (see writes)
}

var (
	_ driver.StmtExecContext   = (*nulSafeStmt)(nil)
	_ driver.StmtQueryContext  = (*nulSafeStmt)(nil)
	_ driver.NamedValueChecker = (*nulSafeStmt)(nil)
)

func (s *nulSafeStmt) Close() error  { return s.inner.Close() }
func (s *nulSafeStmt) NumInput() int { return s.inner.NumInput() }

func (s *nulSafeStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), valuesToNamed(args))
}

func (s *nulSafeStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), valuesToNamed(args))
}

func (s *nulSafeStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := escapeArgs(args); err != nil {
		return nil, err
	}
	ctx, leave, err := s.owner.enter(ctx, true)
	if err != nil {
		return nil, err
	}
	defer leave()
	if e, ok := s.inner.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	values, err := namedToValues(args)
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 fallback for old drivers
	return s.inner.Exec(values)
}

func (s *nulSafeStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := escapeArgs(args); err != nil {
		return nil, err
	}
	ctx, leave, err := s.owner.enter(ctx, s.writes)
	if err != nil {
		return nil, err
	}
	var rows driver.Rows
	if q, ok := s.inner.(driver.StmtQueryContext); ok {
		rows, err = q.QueryContext(ctx, args)
	} else {
		var values []driver.Value
		if values, err = namedToValues(args); err == nil {
			//lint:ignore SA1019 fallback for old drivers
			rows, err = s.inner.Query(values)
		}
	}
	if err != nil {
		leave()
		return nil, err
	}
	return &nulSafeRows{inner: rows, done: leave}, nil
}

func (s *nulSafeStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.inner.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	if ch, ok := s.conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func valuesToNamed(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

// nulSafeRows unescapes the text values of every row. The column type
// methods return what database/sql assumes when a driver lacks them.
type nulSafeRows struct {
	inner driver.Rows
	done  func() // on Close: gives back the write gate a writing query took
}

var (
	_ driver.RowsNextResultSet              = (*nulSafeRows)(nil)
	_ driver.RowsColumnTypeScanType         = (*nulSafeRows)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*nulSafeRows)(nil)
	_ driver.RowsColumnTypeLength           = (*nulSafeRows)(nil)
	_ driver.RowsColumnTypeNullable         = (*nulSafeRows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*nulSafeRows)(nil)
)

func (r *nulSafeRows) Columns() []string { return r.inner.Columns() }
func (r *nulSafeRows) Close() error {
	err := r.inner.Close()
	if r.done != nil {
		r.done()
		r.done = nil
	}
	return err
}

func (r *nulSafeRows) Next(dest []driver.Value) error {
	if err := r.inner.Next(dest); err != nil {
		return err
	}
	for i, v := range dest {
		switch x := v.(type) {
		case string:
			dest[i] = unescapeText(x)
		case []byte:
			dest[i] = unescapeText(x)
		}
	}
	return nil
}

func (r *nulSafeRows) HasNextResultSet() bool {
	n, ok := r.inner.(driver.RowsNextResultSet)
	return ok && n.HasNextResultSet()
}

func (r *nulSafeRows) NextResultSet() error {
	if n, ok := r.inner.(driver.RowsNextResultSet); ok {
		return n.NextResultSet()
	}
	return errors.New("persistence: no next result set")
}

func (r *nulSafeRows) ColumnTypeScanType(i int) reflect.Type {
	if c, ok := r.inner.(driver.RowsColumnTypeScanType); ok {
		return c.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}

func (r *nulSafeRows) ColumnTypeDatabaseTypeName(i int) string {
	if c, ok := r.inner.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return c.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *nulSafeRows) ColumnTypeLength(i int) (int64, bool) {
	if c, ok := r.inner.(driver.RowsColumnTypeLength); ok {
		return c.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *nulSafeRows) ColumnTypeNullable(i int) (bool, bool) {
	if c, ok := r.inner.(driver.RowsColumnTypeNullable); ok {
		return c.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *nulSafeRows) ColumnTypePrecisionScale(i int) (int64, int64, bool) {
	if c, ok := r.inner.(driver.RowsColumnTypePrecisionScale); ok {
		return c.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}
