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
// see the escape. It does nothing else: statements, transactions and their
// contexts pass to the driver as they are.
type nulSafeConnector struct {
	inner driver.Connector
}

func (c nulSafeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &nulSafeConn{inner: conn}, nil
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
	return &nulSafeStmt{inner: st, conn: c.inner}, nil
}

func (c *nulSafeConn) Close() error { return c.inner.Close() }

// Begin is part of driver.Conn; database/sql calls BeginTx.
func (c *nulSafeConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *nulSafeConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	if opts.Isolation != 0 || opts.ReadOnly {
		return nil, errors.New("persistence: the driver does not support transaction options")
	}
	//lint:ignore SA1019 fallback for drivers without BeginTx
	return c.inner.Begin()
}

func (c *nulSafeConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := escapeArgs(args); err != nil {
		return nil, err
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
	var rows driver.Rows
	var err error
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
		return nil, driver.ErrSkip
	}
	if err != nil {
		return nil, err
	}
	return &nulSafeRows{inner: rows}, nil
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
	inner driver.Stmt
	conn  driver.Conn // whose NamedValueChecker applies when the statement has none
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
	var rows driver.Rows
	var err error
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
		return nil, err
	}
	return &nulSafeRows{inner: rows}, nil
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
func (r *nulSafeRows) Close() error      { return r.inner.Close() }

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
