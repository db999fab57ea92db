package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/stretchr/testify/require"
)

func TestDecodeLine(t *testing.T) {
	t.Parallel()
	id7, err := jsonrpc.MakeID(float64(7))
	require.NoError(t, err)
	idA, err := jsonrpc.MakeID("a")
	require.NoError(t, err)
	tests := []struct {
		name    string
		line    string
		want    []jsonrpc.Message
		wantErr string
	}{
		{"a response", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`,
			[]jsonrpc.Message{&jsonrpc.Response{ID: id7, Result: json.RawMessage(`{"content":[]}`)}}, ""},
		{"an error response", `{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"bad"}}`,
			[]jsonrpc.Message{&jsonrpc.Response{ID: idA, Error: &jsonrpc.Error{Code: -32602, Message: "bad"}}}, ""},
		{"a request", `{"jsonrpc":"2.0","id":"a","method":"ping","params":{}}`,
			[]jsonrpc.Message{&jsonrpc.Request{ID: idA, Method: "ping", Params: json.RawMessage(`{}`)}}, ""},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
			[]jsonrpc.Message{&jsonrpc.Request{Method: "notifications/tools/list_changed"}}, ""},
		{"an empty method is a method", `{"jsonrpc":"2.0","id":7,"method":""}`,
			[]jsonrpc.Message{&jsonrpc.Request{ID: id7}}, ""},
		{"a batch, in order", `[{"jsonrpc":"2.0","id":7,"result":1},{"jsonrpc":"2.0","method":"m"}]`,
			[]jsonrpc.Message{&jsonrpc.Response{ID: id7, Result: json.RawMessage(`1`)}, &jsonrpc.Request{Method: "m"}}, ""},
		{"an empty batch", `[]`, nil, "empty JSON-RPC batch"},
		{"another version", `{"jsonrpc":"1.0","id":7,"result":1}`, nil, "invalid message version tag"},
		{"field names match exactly", `{"jsonrpc":"2.0","id":7,"Method":"ping"}`,
			[]jsonrpc.Message{&jsonrpc.Response{ID: id7}}, ""},
		{"a response without id", `{"jsonrpc":"2.0","result":1}`, nil, "without an id"},
		{"an id of another type", `{"jsonrpc":"2.0","id":true,"result":1}`, nil, "invalid ID type"},
		{"not JSON", `{"jsonrpc":`, nil, "unmarshaling jsonrpc message"},
		{"two messages on a line", `{"jsonrpc":"2.0","id":7,"result":1} {"jsonrpc":"2.0","id":8,"result":1}`, nil, "data after the message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeLine([]byte(tt.line))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// connect starts sh -c script as a stdio server.
func connect(t *testing.T, script string, tr stdioTransport) *stdioConn {
	t.Helper()
	tr.cmd = exec.Command("sh", "-c", script)
	if tr.terminate == 0 {
		tr.terminate = 2 * time.Second
	}
	c, err := tr.Connect(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c.(*stdioConn)
}

func TestStdioConnReadsAndWritesLines(t *testing.T) {
	t.Parallel()
	// The server echoes each line it reads; a batch comes back as its
	// messages; then it says a long line (over its own 64 KiB buffer).
	long := strings.Repeat("x", 100<<10)
	c := connect(t, `read line; echo "$line"; echo '[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]';`+
		` printf '{"jsonrpc":"2.0","method":"%s"}\r\n' `+long+`; cat >/dev/null`, stdioTransport{})
	ctx := context.Background()
	id, err := jsonrpc.MakeID(float64(1))
	require.NoError(t, err)
	require.NoError(t, c.Write(ctx, &jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(`{"name":"x"}`)}))
	var methods []string
	for range 4 {
		msg, err := c.Read(ctx)
		require.NoError(t, err)
		methods = append(methods, msg.(*jsonrpc.Request).Method)
	}
	require.Equal(t, []string{"tools/call", "a", "b", long}, methods)
	require.NoError(t, c.Close(), "a server that exits when its stdin closes ends cleanly")
	_, err = c.Read(ctx)
	require.ErrorIs(t, err, io.EOF)
	require.ErrorIs(t, c.Write(ctx, &jsonrpc.Request{Method: "x"}), io.ErrClosedPipe)
}

func TestStdioConnEndsAtTheServersExitAndRefusesLongLines(t *testing.T) {
	t.Parallel()
	c := connect(t, `echo '{"jsonrpc":"2.0","method":"bye"}'`, stdioTransport{})
	msg, err := c.Read(context.Background())
	require.NoError(t, err)
	require.Equal(t, "bye", msg.(*jsonrpc.Request).Method)
	_, err = c.Read(context.Background())
	require.ErrorIs(t, err, io.EOF, "the server exited")

	c = connect(t, `head -c 2000 /dev/zero | tr '\0' x; echo; cat >/dev/null`, stdioTransport{maxLine: 1000})
	_, err = c.Read(context.Background())
	require.ErrorContains(t, err, "longer than 1000 bytes")
}

func TestStdioConnCloseStopsAStubbornServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		signal string // how the process ended
	}{
		{"one that ignores its stdin closing gets SIGTERM", `exec sleep 60`, "terminated"},
		{"one that ignores SIGTERM too is killed", `trap '' TERM; while :; do sleep 0.05; done`, "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := connect(t, tt.script, stdioTransport{terminate: 100 * time.Millisecond})
			done := make(chan error, 1)
			go func() { done <- c.Close() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				require.True(t, errors.As(err, &ee), "Close tells how the process ended: %v", err)
				require.Contains(t, ee.String(), tt.signal)
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not stop the server")
			}
		})
	}
}

// A Write blocked on a server that stopped reading ends when the
// connection closes.
func TestStdioConnCloseEndsABlockedWrite(t *testing.T) {
	t.Parallel()
	c := connect(t, `exec sleep 60`, stdioTransport{terminate: 100 * time.Millisecond})
	big := &jsonrpc.Request{Method: "x", Params: json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)}
	wrote := make(chan error, 1)
	go func() { wrote <- c.Write(context.Background(), big) }()
	select {
	case err := <-wrote:
		t.Fatalf("a 1 MiB write to a server that reads nothing returned: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for _, ch := range []chan error{wrote, closed} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end the blocked write")
		}
	}
}
