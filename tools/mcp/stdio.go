package mcp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/segmentio/encoding/json"
)

// A stdio server's connection. It is the SDK's CommandTransport but for how
// a message is read: the SDK decodes each line twice — first as a batch,
// then as a message — through a decoder that allocates a 32 KiB buffer each
// time, 64 KiB of garbage for every response, which was a sixth of what a
// 12-step turn allocated. Here each line is parsed once, in place (the
// same JSON library and case-sensitive field matching as the SDK). Messages
// are one per line, as the MCP stdio transport defines them; a batch (an
// array, from servers of protocol versions before 2025-06-18) is read as
// its messages in order. Closing follows the SDK's and the specification's
// order: close the server's stdin, wait for it to exit, then SIGTERM, then
// SIGKILL.

// stdioTransport starts cmd and speaks JSON-RPC over its stdin and stdout.
type stdioTransport struct {
	cmd *exec.Cmd
	// terminate is how long Close waits for the server to exit after its
	// stdin closed, and again after SIGTERM.
	terminate time.Duration
	// maxLine bounds one message (default sdk.DefaultMaxLineLength).
	maxLine int
}

// Connect starts the command.
func (t *stdioTransport) Connect(context.Context) (sdk.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	maxLine := t.maxLine
	if maxLine <= 0 {
		maxLine = sdk.DefaultMaxLineLength
	}
	c := &stdioConn{cmd: t.cmd, stdin: stdin, terminate: t.terminate,
		incoming: make(chan readResult), closed: make(chan struct{}), exited: make(chan struct{})}
	go c.readLines(stdout, maxLine)
	return c, nil
}

// readResult is one message read, or the error that ended reading.
type readResult struct {
	msgs []jsonrpc.Message
	err  error
}

// stdioConn is a connection to a started server.
type stdioConn struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	terminate time.Duration

	incoming chan readResult
	queue    []jsonrpc.Message // the rest of a batch; only Read touches it

	writeMu sync.Mutex

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{} // closed by Close: Read returns, the reader stops
	waitOnce  sync.Once
	exited    chan struct{} // closed when the process has exited
	waitErr   error         // how it exited, once exited is closed
}

// reap waits for the process in the background, once: after its stdout
// ended (Wait closes the pipe, so not before everything was read) or when
// the connection closes.
func (c *stdioConn) reap() {
	c.waitOnce.Do(func() {
		go func() {
			c.waitErr = c.cmd.Wait()
			close(c.exited)
		}()
	})
}

// readLines reads messages, one a line, until stdout ends or the
// connection closes.
func (c *stdioConn) readLines(stdout io.Reader, maxLine int) {
	defer c.reap()
	r := bufio.NewReaderSize(stdout, 64<<10)
	tooLong := readResult{err: fmt.Errorf("MCP message longer than %d bytes", maxLine)}
	var long []byte // a line longer than r's buffer, gathered
	for {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if long = append(long, chunk...); len(long) > maxLine {
				c.deliver(tooLong)
				return
			}
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		if len(line) > maxLine {
			c.deliver(tooLong)
			return
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			msgs, derr := decodeLine(line)
			if !c.deliver(readResult{msgs: msgs, err: derr}) || derr != nil {
				return
			}
		}
		if err != nil {
			c.deliver(readResult{err: err}) // io.EOF: the server closed its stdout
			return
		}
	}
}

// deliver hands res to Read; false once the connection is closed.
func (c *stdioConn) deliver(res readResult) bool {
	select {
	case c.incoming <- res:
		return true
	case <-c.closed:
		return false
	}
}

// wireMessage is a JSON-RPC message as it is read: a request or
// notification (method present) or a response.
type wireMessage struct {
	Version string          `json:"jsonrpc"`
	ID      any             `json:"id,omitempty"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
}

// parseFlags are the SDK's: fields match their names exactly.
const parseFlags = json.DontMatchCaseInsensitiveStructFields

// decodeLine parses one line: a message, or a batch of them. Parsed values
// are copies, so the line's buffer may be reused.
func decodeLine(line []byte) ([]jsonrpc.Message, error) {
	if line[0] != '[' {
		msg, err := decodeMessage(line)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{msg}, nil
	}
	var raws []json.RawMessage
	if _, err := json.Parse(line, &raws, parseFlags); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc batch: %w", err)
	}
	if len(raws) == 0 {
		return nil, errors.New("empty JSON-RPC batch")
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		msg, err := decodeMessage(raw)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// decodeMessage parses one message as jsonrpc.DecodeMessage does.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var w wireMessage
	rest, err := json.Parse(data, &w, parseFlags)
	if err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("unmarshaling jsonrpc message: data after the message")
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", w.Version, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if w.Method != nil {
		return &jsonrpc.Request{Method: *w.Method, ID: id, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("JSON-RPC response without an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
}

// Read returns the next message.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.queue = c.queue[1:]
		return next, nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case res := <-c.incoming:
		if res.err != nil {
			return nil, res.err
		}
		c.queue = res.msgs[1:]
		return res.msgs[0], nil
	}
}

// Write sends msg on a line of its own.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	_, err = c.stdin.Write(data)
	return err
}

// Close ends the connection: the server's stdin is closed, and the server
// is waited for, then sent SIGTERM, then killed. It returns how the
// process ended (an *exec.ExitError when it failed or was signalled).
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		// Not under writeMu: closing stdin is what ends a Write blocked on
		// a server that stopped reading.
		stdinErr := c.stdin.Close()
		c.reap()
		c.closeErr = c.stop()
		if c.closeErr == nil && stdinErr != nil && !errors.Is(stdinErr, io.ErrClosedPipe) && !errors.Is(stdinErr, syscall.EPIPE) {
			c.closeErr = fmt.Errorf("closing stdin: %w", stdinErr)
		}
	})
	return c.closeErr
}

// stop waits for the process to exit, asking harder each time it does not.
func (c *stdioConn) stop() error {
	exited := func() bool {
		t := time.NewTimer(c.terminate)
		defer t.Stop()
		select {
		case <-c.exited:
			return true
		case <-t.C:
			return false
		}
	}
	if exited() {
		return c.waitErr
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err == nil && exited() {
		return c.waitErr
	}
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-c.exited
	return c.waitErr
}

// SessionID is empty: a stdio connection has no session id.
func (c *stdioConn) SessionID() string { return "" }
