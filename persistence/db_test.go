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
