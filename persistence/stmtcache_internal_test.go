package persistence

import (
	"context"
	"database/sql/driver"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// fakeConn prepares fakeStmts and counts what happens to them.
type fakeConn struct {
	driver.Conn
	prepared map[string]int
	closed   map[string]int
}

func (c *fakeConn) Prepare(query string) (driver.Stmt, error) {
	c.prepared[query]++
	return &fakeStmt{conn: c, sql: query}, nil
}

type fakeStmt struct {
	driver.Stmt
	conn *fakeConn
	sql  string
}

func (s *fakeStmt) Close() error { s.conn.closed[s.sql]++; return nil }
func (s *fakeStmt) ExecContext(context.Context, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}
func (s *fakeStmt) QueryContext(context.Context, []driver.NamedValue) (driver.Rows, error) {
	return emptyRows{}, nil
}

type emptyRows struct{}

func (emptyRows) Columns() []string              { return nil }
func (emptyRows) Close() error                   { return nil }
func (emptyRows) Next(dest []driver.Value) error { return io.EOF }

func TestStmtCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newConn := func() *fakeConn { return &fakeConn{prepared: map[string]int{}, closed: map[string]int{}} }

	t.Run("a statement is prepared once and reused", func(t *testing.T) {
		t.Parallel()
		conn, c := newConn(), newStmtCache(4)
		for range 3 {
			_, err := c.exec(ctx, conn, "UPDATE t SET a = ?", nil)
			require.NoError(t, err)
		}
		require.Equal(t, 1, conn.prepared["UPDATE t SET a = ?"])
		require.Zero(t, conn.closed["UPDATE t SET a = ?"])
	})
	t.Run("a statement whose rows are open is not shared", func(t *testing.T) {
		t.Parallel()
		conn, c := newConn(), newStmtCache(4)
		q := "SELECT a FROM t"
		_, done, err := c.query(ctx, conn, q, nil)
		require.NoError(t, err)
		// The same text while its rows are open: a statement of its own,
		// closed when its rows close.
		_, inner, err := c.query(ctx, conn, q, nil)
		require.NoError(t, err)
		require.Equal(t, 2, conn.prepared[q])
		inner()
		require.Equal(t, 1, conn.closed[q])
		done()
		_, again, err := c.query(ctx, conn, q, nil)
		require.NoError(t, err)
		again()
		require.Equal(t, 2, conn.prepared[q], "the cached statement is reused once its rows closed")
	})
	t.Run("the least recently used statement is closed first", func(t *testing.T) {
		t.Parallel()
		conn, c := newConn(), newStmtCache(2)
		for _, q := range []string{"SELECT 1", "SELECT 2", "SELECT 1", "SELECT 3"} {
			_, err := c.exec(ctx, conn, q, nil)
			require.NoError(t, err)
		}
		require.Equal(t, 1, conn.closed["SELECT 2"])
		require.Zero(t, conn.closed["SELECT 1"])
		c.close()
		require.Equal(t, 1, conn.closed["SELECT 1"])
		require.Equal(t, 1, conn.closed["SELECT 3"])
	})
}

func TestCacheable(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"SELECT * FROM t WHERE id = ?":       true,
		"INSERT INTO t VALUES (?);":          true,
		"  update t set a = 1":               true,
		"CREATE TABLE a (x); CREATE TABLE b": false,
		"BEGIN IMMEDIATE":                    false,
		"commit":                             false,
		"ROLLBACK":                           false,
		"PRAGMA foreign_keys = ON":           false,
		"":                                   true,
	}
	for q, want := range cases {
		require.Equal(t, want, cacheable(q), q)
	}
}

// On a real SQLite connection: a query run again inside the loop over its
// own rows (one connection, one transaction) reads right, and rows written
// by cached statements are all there.
func TestStmtCacheOnSQLite(t *testing.T) {
	t.Parallel()
	g := sqliteWith(t, `CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT)`)
	require.NoError(t, g.Transaction(func(tx *gorm.DB) error {
		for i := range 5 {
			if err := tx.Exec(`INSERT INTO kv (k, v) VALUES (?, ?)`, i, "v\x00"+string(rune('a'+i))).Error; err != nil {
				return err
			}
		}
		rows, err := tx.Raw(`SELECT k, v FROM kv WHERE k >= ? ORDER BY k`, 0).Rows()
		if err != nil {
			return err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var k int
			var v string
			require.NoError(t, rows.Scan(&k, &v))
			require.Equal(t, "v\x00"+string(rune('a'+k)), v)
			var inner []struct {
				K int
				V string
			}
			require.NoError(t, tx.Raw(`SELECT k, v FROM kv WHERE k >= ? ORDER BY k`, k).Scan(&inner).Error)
			require.Len(t, inner, 5-k)
			require.Equal(t, k, inner[0].K)
			n++
		}
		require.Equal(t, 5, n)
		return rows.Err()
	}))
}

func TestSteadyLimits(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"SELECT a FROM t LIMIT ?":                                            "SELECT a FROM t LIMIT +?",
		"SELECT a FROM t limit\n  ?3 OFFSET ?4":                              "SELECT a FROM t limit\n  +?3 OFFSET ?4",
		"SELECT a FROM t WHERE id IN (SELECT id FROM t LIMIT @max) LIMIT :n": "SELECT a FROM t WHERE id IN (SELECT id FROM t LIMIT +@max) LIMIT +:n",
		"SELECT a FROM t LIMIT 10":                                           "SELECT a FROM t LIMIT 10",
		"SELECT a FROM t LIMIT +?":                                           "SELECT a FROM t LIMIT +?",
		"SELECT 'LIMIT ?' FROM t LIMIT ?":                                    "SELECT 'LIMIT ?' FROM t LIMIT +?",
		"SELECT 'it''s LIMIT ?', \"LIMIT ?\" FROM [LIMIT ?]":                 "SELECT 'it''s LIMIT ?', \"LIMIT ?\" FROM [LIMIT ?]",
		"SELECT a -- LIMIT ?\nFROM t /* LIMIT ? */ LIMIT ?":                  "SELECT a -- LIMIT ?\nFROM t /* LIMIT ? */ LIMIT +?",
		"SELECT nolimit ?, limits ? FROM t":                                  "SELECT nolimit ?, limits ? FROM t",
		"SELECT a FROM t LIMIT":                                              "SELECT a FROM t LIMIT",
		"SELECT 'unterminated LIMIT ?":                                       "SELECT 'unterminated LIMIT ?",
		"":                                                                   "",
	}
	for in, want := range cases {
		require.Equal(t, want, steadyLimits(in), in)
	}
}

// The cache prepares a statement with LIMIT ? as LIMIT +? (steadyLimits)
// and keeps it under the text it was given.
func TestStmtCachePreparesSteadyLimits(t *testing.T) {
	t.Parallel()
	conn, c := &fakeConn{prepared: map[string]int{}, closed: map[string]int{}}, newStmtCache(4)
	for range 2 {
		_, done, err := c.query(t.Context(), conn, "SELECT a FROM t LIMIT ?", nil)
		require.NoError(t, err)
		done()
	}
	require.Equal(t, map[string]int{"SELECT a FROM t LIMIT +?": 1}, conn.prepared)
}

// On SQLite a LIMIT bound again and again still limits: the rewritten
// statement counts as the original did.
func TestSteadyLimitsOnSQLite(t *testing.T) {
	t.Parallel()
	g := sqliteWith(t, `CREATE TABLE n (k INTEGER PRIMARY KEY)`)
	for i := range 6 {
		require.NoError(t, g.Exec(`INSERT INTO n (k) VALUES (?)`, i).Error)
	}
	for _, limit := range []int{0, 2, 5, 1, 10, -1} {
		var got []int
		require.NoError(t, g.Raw(`UPDATE n SET k = k WHERE k IN (SELECT k FROM n ORDER BY k LIMIT ?) RETURNING k`, limit).Scan(&got).Error)
		want := min(max(limit, 0), 6)
		if limit < 0 {
			want = 6 // a negative LIMIT is none
		}
		require.Len(t, got, want, "LIMIT %d", limit)
	}
}

// sqliteWith is a new SQLite database, closed with the test, made by ddl.
func sqliteWith(t *testing.T, ddl string) *gorm.DB {
	t.Helper()
	db, err := Open(context.Background(), Config{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "t.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	g := db.Gorm()
	require.NoError(t, g.Exec(ddl).Error)
	return g
}
