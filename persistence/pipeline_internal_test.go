package persistence

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/stretchr/testify/require"
)

// A batch's COMMIT goes with its last statements only when every outcome
// that could refuse the batch shows on the server.
func TestPipelineCommitsWithItsStatementsWhenNothingNeedsAnAnswer(t *testing.T) {
	t.Parallel()
	end := func(int64, error) error { return nil }
	read := func(rowScanner) error { return nil }
	rules := mergeRules()
	step := rules[dollars(updateStepSQL)]
	start := rules[dollars(startExecutionSQL)]
	for _, tc := range []struct {
		name string
		it   pipeItem
		want bool
	}{
		{"a plain statement", pipeItem{query: "INSERT INTO t VALUES ($1)", end: end}, false},
		{"a statement that must match a row", pipeItem{query: "UPDATE t SET a = $1", end: end, must: true}, false},
		{"one that returns rows", pipeItem{query: "UPDATE t SET a = $1 RETURNING id", end: end, must: true}, true},
		{"one with a WITH of its own", pipeItem{query: " with x AS (SELECT 1) UPDATE t SET a = 1", end: end, must: true}, true},
		{"a query whose rows decide", pipeItem{query: "SELECT 1", read: read}, true},
		{"a query whose rows only inform", pipeItem{query: "SELECT 1", read: read, informs: true}, false},
		{"a check with its assertion", pipeItem{query: "SELECT 1", read: read, assert: "SELECT 1/0"}, false},
		{"merged inserts", pipeItem{merged: &mergedRows{rule: start, members: []pipeItem{{end: end}, {end: end}}}}, false},
		{"merged updates that must match", pipeItem{merged: &mergedRows{rule: step, members: []pipeItem{{must: true}, {must: true}}}}, false},
		{"merged updates one of which may match nothing", pipeItem{merged: &mergedRows{rule: step, members: []pipeItem{{must: true}, {}}}}, true},
	} {
		require.Equal(t, tc.want, needsAnswer(tc.it), tc.name)
	}
}

// Sent with COMMIT, what could refuse the batch fails on the server:
// division by zero when it matched too little.
func TestAssertedStatementsFailOnTheServer(t *testing.T) {
	t.Parallel()
	end := func(int64, error) error { return nil }
	read := func(rowScanner) error { return nil }
	step := mergeRules()[dollars(updateStepSQL)]
	items := []pipeItem{
		{query: "BEGIN", end: end},
		{query: "SELECT id FROM runs WHERE id = $1", args: []any{"r1"}, read: read, assert: "SELECT 1/(count(*) = 1)::int FROM runs WHERE id = $1 AND lease_token = $2",
			assertArgs: []any{"r1", int64(3)}, check: "SELECT id FROM runs WHERE id = $1", checkArgs: []any{"r1"}},
		{query: "UPDATE t SET a = $1 WHERE id = $2", args: []any{1, "x"}, end: end, must: true},
		{query: step.sql(2), merged: &mergedRows{rule: step, members: []pipeItem{{must: true}, {must: true}}}},
		{query: "SELECT status FROM p", read: read, informs: true},
		{query: "INSERT INTO e VALUES ($1)", end: end},
	}
	got := asserted(items)
	require.Len(t, got, len(items))
	require.Equal(t, "BEGIN", got[0].query, "a plain statement is sent as it is")
	require.False(t, got[0].asserted)
	require.True(t, got[1].asserted)
	require.Equal(t, items[1].assert, got[1].query, "a check is sent as its assertion")
	require.Equal(t, []any{"r1", int64(3)}, got[1].args)
	require.Equal(t, "SELECT id FROM runs WHERE id = $1", got[1].check, "and kept, to read again what it refuses")
	require.True(t, got[2].asserted)
	require.Equal(t, "WITH w AS (UPDATE t SET a = $1 WHERE id = $2 RETURNING 1) SELECT count(*), 1/count(*) FROM w", got[2].query)
	require.Equal(t, items[2].args, got[2].args)
	require.True(t, got[3].merged.asserted)
	require.Equal(t, "WITH w AS ("+step.sql(2)+") SELECT 1/(count(*) = 2)::int FROM w", got[3].query, "every row merged must match")
	require.False(t, items[3].merged.asserted, "the items given are left as they were")
	require.Equal(t, items[4].query, got[4].query, "rows that only inform are read as they are")
	require.False(t, got[4].asserted)
	require.Equal(t, items[5].query, got[5].query)
}

// A batch's statements are encoded into the connection's write buffer: with
// its size reserved first the buffer is one allocation (and the fresh 1
// KiB one pgx takes after the flush), where appending grew it a quarter at
// a time. Not parallel: AllocsPerRun counts the whole process's
// allocations.
func TestReservedWriteBufferTakesABatchAtOnce(t *testing.T) {
	var args []any
	var params [][]byte
	for i := range 300 {
		s := strings.Repeat(string(rune('a'+i%26)), 200+i)
		args = append(args, s)
		params = append(params, []byte(s))
	}
	args = append(args, int64(7))
	params = append(params, []byte("7"))
	send := func(reserved bool) float64 {
		fe := pgproto3.NewFrontend(bytes.NewReader(nil), io.Discard)
		return testing.AllocsPerRun(20, func() {
			if reserved {
				fe.Send(reserve(encodedSize(args)))
			}
			fe.SendBind(&pgproto3.Bind{PreparedStatement: "stmtcache_0123456789abcdef0123456789abcdef0123456789abcdef",
				ParameterFormatCodes: []int16{0}, Parameters: params, ResultFormatCodes: []int16{1}})
			fe.SendDescribe(&pgproto3.Describe{ObjectType: 'P'})
			fe.SendExecute(&pgproto3.Execute{})
			fe.SendSync(&pgproto3.Sync{})
			require.NoError(t, fe.Flush())
		})
	}
	grown, reserved := send(false), send(true)
	t.Logf("allocations: %v grown, %v reserved", grown, reserved)
	require.LessOrEqual(t, reserved, 3.0, "reserved: one buffer for the batch, the Bind message, and the buffer pgx takes after the flush")
	require.GreaterOrEqual(t, grown-reserved, 8.0, "without a reservation the buffer grows append by append")
}
