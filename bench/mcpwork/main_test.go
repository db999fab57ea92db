package main

import (
	"context"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func connect(t *testing.T, w *worker) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := w.server().Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, cs.Close())
		_ = ss.Wait()
	})
	return cs
}

func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	require.False(t, res.IsError)
	require.Len(t, res.Content, 1)
	tc, ok := res.Content[0].(*sdk.TextContent)
	require.True(t, ok, "content is %T", res.Content[0])
	return tc.Text
}

func TestWorkAnswersAfterItsDelay(t *testing.T) {
	t.Parallel()
	cs := connect(t, &worker{delay: 30 * time.Millisecond})
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 1)
	require.Equal(t, "work", tools.Tools[0].Name)

	start := time.Now()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "work", Arguments: map[string]any{"label": "step 3"}})
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "a call lasts at least its delay")
	require.Equal(t, "worked 30ms on step 3", text(t, res))

	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "work", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.Equal(t, "worked 30ms", text(t, res))
}

// Calls overlap: the benchmark's four parallel steps of a layer must not
// queue behind one another in the tool server. Every call waits until all
// four have started, which only happens if the server runs them at once.
func TestWorkServesCallsConcurrently(t *testing.T) {
	t.Parallel()
	const n = 4
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	w := &worker{started: func() {
		arrived.Done()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
		}
	}}
	cs := connect(t, w)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "work", Arguments: map[string]any{}})
			errs <- err
		})
	}
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not run four calls at once")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
