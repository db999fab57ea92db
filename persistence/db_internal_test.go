package persistence

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestRebind(t *testing.T) {
	t.Parallel()
	const q = "UPDATE t SET a = ?, b = ? WHERE id = ?"
	require.Equal(t, q, (&DB{driver: DriverSQLite}).rebind(q))
	pg := &DB{driver: DriverPostgres}
	require.Equal(t, "UPDATE t SET a = $1, b = $2 WHERE id = $3", pg.rebind(q))
	require.Equal(t, "UPDATE t SET a = $1, b = $2 WHERE id = $3", pg.rebind(q), "from the cache")
}

// Unless configured, SQLite's pool has a connection per thread that can run
// SQLite's code (at least 4, at most 16), PostgreSQL's 16.
func TestPoolSize(t *testing.T) {
	t.Parallel()
	sqlite := min(max(runtime.GOMAXPROCS(0), 4), 16)
	for _, c := range []struct {
		cfg  Config
		want int
	}{
		{Config{Driver: DriverSQLite}, sqlite},
		{Config{Driver: DriverSQLite, MaxOpenConns: 32}, 32},
		{Config{Driver: DriverPostgres}, 16},
		{Config{Driver: DriverPostgres, MaxOpenConns: 3}, 3},
	} {
		require.Equal(t, c.want, c.cfg.maxOpen(), "%+v", c.cfg)
	}
	db, err := Open(t.Context(), Config{Driver: DriverSQLite, DSN: filepath.Join(t.TempDir(), "p.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.Equal(t, sqlite, db.sql.Stats().MaxOpenConnections)
}

// PostgreSQL connections cache statements (pgx's default mode), keep no
// description cache, which that mode never reads, and plan their prepared
// statements once (plan_cache_mode); a DSN that asks for the description
// cache's mode keeps it, and one that sets plan_cache_mode keeps its own.
func TestPostgresConnDefaults(t *testing.T) {
	t.Parallel()
	pc, err := pgConfig("postgres://u@127.0.0.1:1/db", time.Second)
	require.NoError(t, err)
	require.Zero(t, pc.DescriptionCacheCapacity)
	require.Equal(t, 512, pc.StatementCacheCapacity)
	require.Equal(t, "force_generic_plan", pc.RuntimeParams["plan_cache_mode"])

	own, err := pgx.ParseConfig("postgres://u@127.0.0.1:1/db?default_query_exec_mode=cache_describe&plan_cache_mode=auto")
	require.NoError(t, err)
	connDefaults(own)
	require.Equal(t, 512, own.DescriptionCacheCapacity)
	require.Equal(t, "auto", own.RuntimeParams["plan_cache_mode"])
}
