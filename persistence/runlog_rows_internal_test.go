package persistence

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordedStmts is a batchStmts that records the statements it is given.
type recordedStmts struct{ queries []string }

func (r *recordedStmts) exec(_ context.Context, query string, _ []any, end func(int64, error) error) error {
	r.queries = append(r.queries, query)
	return end(1, nil)
}

func (r *recordedStmts) query(context.Context, string, []any, func(rowScanner) error) error {
	return nil
}

func (*recordedStmts) flush(context.Context) error { return nil }

// A batch's queued rows are inserted one table at a time, the tables
// others refer to first — an agent before its conversation, a conversation
// before its messages — whatever table another run queued first.
func TestInsertRowsOrdersTablesByTheirForeignKeys(t *testing.T) {
	t.Parallel()
	row := func(table string) pendingEvent {
		return pendingEvent{row: &rowInsert{table: table, cols: "(id)", args: []any{table}}}
	}
	batch := []pendingEvent{
		row("agent_chat_messages"), // another run's message
		row("chat_tool_executions"),
		row("agents"),
		row("agent_chat_sessions"),
		row("agent_chat_messages"),
	}
	var got recordedStmts
	require.NoError(t, logTx{db: &DB{driver: DriverSQLite}}.insertRows(context.Background(), &got, batch))
	var tables []string
	for _, q := range got.queries {
		tables = append(tables, strings.Fields(q)[2])
	}
	require.Equal(t, []string{"agents", "agent_chat_sessions", "agent_chat_messages", "chat_tool_executions"}, tables)
	require.Contains(t, got.queries[2], "VALUES (?),(?)", "one table's rows are one INSERT")
}
