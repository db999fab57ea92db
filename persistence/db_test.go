package persistence_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
)

func TestMigrateTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := context.Background()
		applied, err := db.Migrate(ctx)
		require.NoError(t, err)
		require.Empty(t, applied, "dbtest.Open already migrated")

		status, err := db.MigrationStatus(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, status)
		for _, s := range status {
			require.True(t, s.Applied, "migration %s", s.Name)
		}
	})
}

func TestRedact(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db?password=secret":             "postgres://u@h/db?password=xxxxx",
		"host=h user=u password=secret dbname=d":        "host=h user=u password=xxxxx dbname=d",
		"data/planwright.db":                            "data/planwright.db",
	}
	for in, want := range cases {
		require.Equal(t, want, persistence.Redact(in), in)
	}
}

// TestPostgresPlansPreparedStatementsOnce: every pool of the service — the
// project's, the run log's writer's and River's — plans prepared
// statements once (plan_cache_mode force_generic_plan) unless the DSN
// chose otherwise, which every pool then keeps.
func TestPostgresPlansPreparedStatementsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, param, want string
	}{
		{"default", "", "force_generic_plan"},
		{"the DSN's own", "&plan_cache_mode=auto", "auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := dbtest.Config(t, persistence.DriverPostgres)
			cfg.DSN += tc.param
			db := dbtest.OpenConfig(t, cfg)
			ctx := t.Context()
			var project string
			require.NoError(t, db.SQL().QueryRowContext(ctx, "SELECT current_setting('plan_cache_mode')").Scan(&project))
			require.Equal(t, tc.want, project, "the project's pool")

			log, _ := openRunLog(t, db)
			writer, err := log.Setting(ctx, "plan_cache_mode")
			require.NoError(t, err)
			require.Equal(t, tc.want, writer, "the run log's writer")

			jobs, _ := startJobsWith(t, db, persistence.JobsConfig{})
			river, err := jobs.Setting(ctx, "plan_cache_mode")
			require.NoError(t, err)
			require.Equal(t, tc.want, river, "River's pool")
		})
	}
}

// SQLite connections keep statement journals and temporary tables in
// memory (temp_store = MEMORY, 2): a statement journal past its spill size
// would otherwise be a file created and unlinked inside the statement.
func TestSQLiteKeepsTemporaryDataInMemory(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t, persistence.DriverSQLite)
	ctx := t.Context()
	var project string
	require.NoError(t, db.SQL().QueryRowContext(ctx, "PRAGMA temp_store").Scan(&project))
	require.Equal(t, "2", project, "the project's pool")
	log, _ := openRunLog(t, db)
	writer, err := log.Pragma(ctx, "temp_store")
	require.NoError(t, err)
	require.Equal(t, "2", writer, "the run log's writer")
}
