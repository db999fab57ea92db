package mcp_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/mcp"
)

// BenchmarkStdioCall measures a tool call to an MCP server over stdio
// (this test binary as the server): one call at a time, and four at once
// as a plan's layer of four steps makes them.
func BenchmarkStdioCall(b *testing.B) {
	for _, n := range []int{1, 4} {
		b.Run(map[int]string{1: "one", 4: "four_at_once"}[n], func(b *testing.B) {
			m, err := mcp.NewManager(mcp.ManagerConfig{Servers: []mcp.ServerConfig{stdioConfig("local")}, ClientName: "planwright-bench", ClientVersion: "0"})
			require.NoError(b, err)
			b.Cleanup(func() { require.NoError(b, m.Close()) })
			ts, err := m.Tools(context.Background())
			require.NoError(b, err)
			var echo tools.Tool
			for _, tl := range ts {
				if tl.Spec().Name == "local.echo" {
					echo = tl
				}
			}
			require.NotNil(b, echo)
			call := tools.Call{ID: "c", Name: "local.echo", Args: json.RawMessage(`{"text":"hi"}`)}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						if _, err := echo.Run(context.Background(), call); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}
