package persistence_test

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/migrations"
	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/planning/planningtest"
)

// designTables are the tables DESIGN.md names; the schema must have them all
// from the first migration on.
var designTables = []string{
	"api_keys", "chat_sessions", "chat_messages", "chat_tool_executions", "agents", "agent_definitions",
	"agent_plans", "agent_plan_steps", "agent_plan_revisions", "agent_plan_reviews", "agent_chat_sessions",
	"agent_chat_messages", "agent_executions",
}

// columns returns table → sorted column names of the migrated database.
func columns(t *testing.T, db *persistence.DB) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	var rows interface {
		Next() bool
		Scan(...any) error
		Close() error
		Err() error
	}
	var err error
	if db.Driver() == persistence.DriverPostgres {
		rows, err = db.SQL().QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name <> 'goose_db_version' AND table_name NOT LIKE 'river\_%'`)
	} else {
		rows, err = db.SQL().QueryContext(ctx, `SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'goose_db_version' AND m.name NOT LIKE 'river\_%' ESCAPE '\'`)
	}
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var table, column string
		require.NoError(t, rows.Scan(&table, &column))
		out[table] = append(out[table], column)
	}
	require.NoError(t, rows.Err())
	for _, cols := range out {
		sort.Strings(cols)
	}
	return out
}

func indexes(t *testing.T, db *persistence.DB) []string {
	t.Helper()
	// River's tables are River's (its SQLite schema is its own); only the
	// project's are kept in lockstep.
	q := `SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name NOT LIKE 'river\_%' ESCAPE '\'`
	if db.Driver() == persistence.DriverPostgres {
		q = `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname NOT LIKE '%_pkey'
			AND indexname NOT LIKE '%_key' AND tablename <> 'goose_db_version' AND tablename NOT LIKE 'river\_%'`
	}
	rows, err := db.SQL().QueryContext(context.Background(), q)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		out = append(out, name)
	}
	require.NoError(t, rows.Err())
	sort.Strings(out)
	return out
}

func TestMigrationsParity(t *testing.T) {
	t.Parallel()
	sqlite := dbtest.Open(t, persistence.DriverSQLite)
	pg := dbtest.Open(t, persistence.DriverPostgres)

	sc, pc := columns(t, sqlite), columns(t, pg)
	require.Equal(t, pc, sc, "both dialects must produce the same tables and columns")
	for _, table := range designTables {
		require.Contains(t, sc, table)
	}
	require.Equal(t, indexes(t, pg), indexes(t, sqlite), "both dialects must create the same named indexes")
}

func TestMigrationFilesInLockstep(t *testing.T) {
	t.Parallel()
	names := func(fsys fs.FS) []string {
		entries, err := fs.ReadDir(fsys, ".")
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	require.Equal(t, names(migrations.Postgres()), names(migrations.SQLite()))
}

func TestIndexesOperatorsQueryBy(t *testing.T) {
	t.Parallel()
	want := []string{
		"agent_plans_status_idx", "agent_plans_session_idx", "agent_plans_user_idx", "agent_executions_plan_idx",
		"chat_messages_session_idx", "chat_messages_turn_idx",
	}
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		got := indexes(t, db)
		for _, w := range want {
			require.Contains(t, got, w)
		}
	})
}

// Two replicas starting together both migrate; the session lock (Postgres)
// and the write lock (SQLite) make one wait for the other.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			cfg := dbtest.Config(t, driver)
			ctx := context.Background()
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Go(func() {
					db, err := persistence.Open(ctx, cfg)
					if err != nil {
						errs[i] = err
						return
					}
					defer db.Close()
					_, errs[i] = db.Migrate(ctx)
				})
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "replica %d", i)
			}
			db, err := persistence.Open(ctx, cfg)
			require.NoError(t, err)
			defer db.Close()
			st, err := db.MigrationStatus(ctx)
			require.NoError(t, err)
			for _, s := range st {
				require.True(t, s.Applied, fmt.Sprint(s))
			}
			require.Contains(t, strings.Join(tableNames(columns(t, db)), ","), "agent_plans")
		})
	}
}

func tableNames(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestTranscriptsKeepTheirConversationsKey: on PostgreSQL
// agent_chat_messages has no foreign key (migration 00009: a check a row),
// but the guarantees of one hold on both drivers — a message naming a
// conversation that does not exist is refused, whether alone or among
// others in one INSERT, and deleting a conversation deletes its messages.
func TestTranscriptsKeepTheirConversationsKey(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDriver(t, func(t *testing.T, db *persistence.DB) {
		ctx := t.Context()
		st := dbtest.NewStores(t, db)
		p := planningtest.SamplePlan("alice", "s1")
		require.NoError(t, st.Plans.CreatePlan(ctx, &p))
		agent, as, exec := planningtest.ExecutorRun(p)
		require.NoError(t, st.Executions.StartExecution(ctx, agent, as, exec))
		for _, m := range planningtest.Transcript(as, exec) {
			require.NoError(t, st.Executions.AppendAgentMessage(ctx, m))
		}
		count := func(sessionID string) int64 {
			var n int64
			require.NoError(t, db.Gorm().Raw("SELECT count(*) FROM agent_chat_messages WHERE agent_session_id = ?", sessionID).Scan(&n).Error)
			return n
		}
		stored := count(as.ID)
		require.Positive(t, stored)

		lost := persistence.NewID()
		require.Error(t, st.Executions.AppendAgentMessage(ctx, planning.AgentMessage{AgentSessionID: lost, Seq: 1, Role: "user"}))
		insert := `INSERT INTO agent_chat_messages (id, agent_session_id, seq, role, created_at) VALUES (?, ?, 90, 'user', ?), (?, ?, 1, 'user', ?)`
		now := time.Now().UTC()
		require.Error(t, db.Gorm().Exec(insert, persistence.NewID(), as.ID, now, persistence.NewID(), lost, now).Error,
			"one row of the INSERT names no conversation: none is stored")
		require.Equal(t, stored, count(as.ID))
		require.Zero(t, count(lost))

		require.NoError(t, db.Gorm().Exec("DELETE FROM agent_chat_sessions WHERE id = ?", as.ID).Error)
		require.Zero(t, count(as.ID), "a conversation's messages go with it")
	})
}
