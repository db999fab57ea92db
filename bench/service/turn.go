package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/pkg/textcut"
)

// client talks to one server as its single user (auth none).
type client struct {
	base string
	http *http.Client
}

func newClient(base string) *client {
	return &client{base: base, http: &http.Client{Transport: &http.Transport{
		MaxIdleConns:        0, // no limit
		MaxIdleConnsPerHost: 1024,
		DisableCompression:  true,
	}}}
}

// committedBatches finds the run log's committed transactions in a
// server's /metrics.
var committedBatches = regexp.MustCompile(`(?m)^planwright_runlog_batches_total\{outcome="committed"\} (\S+)$`)

// commits reads how many transactions the server's run log has committed
// so far (0 before its first).
func (c *client) commits() (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := c.read(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	m := committedBatches.FindSubmatch(body)
	if m == nil {
		return 0, nil
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// prepareShot makes n turns of w ready for a concurrent shot, each on a
// connection of its own dialed now, as n clients that already hold a
// connection: the shot then measures the server, not one process dialing
// n sockets at once on the cores the server runs on. It returns once the
// server has accepted every connection (awaitAccepted). The caller runs
// every turn (shotTurn.run closes its connection).
func (c *client) prepareShot(ctx context.Context, w workload, n int) ([]*shotTurn, error) {
	u, err := url.Parse(c.base)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	ready := make([]*shotTurn, 0, n)
	fail := func(err error) ([]*shotTurn, error) {
		for _, t := range ready {
			t.conn.Close()
		}
		return nil, err
	}
	for range n {
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err == nil {
			var t *shotTurn
			if t, err = c.prepareTurn(ctx, w, conn); err == nil {
				ready = append(ready, t)
				continue
			}
			conn.Close()
		}
		return fail(err)
	}
	if err := awaitAccepted(ctx, u.Port()); err != nil {
		return fail(err)
	}
	return ready, nil
}

// awaitAccepted waits until no connection to port waits in the server's
// accept queue. A dial returns once the kernel has the connection, not once
// the server accepted it: 500 dials in a row left some 70 still queued, and
// a shot started at once measured their accepts too. Where the queue
// cannot be read (no /proc/net/tcp) it does not wait.
func awaitAccepted(ctx context.Context, port string) error {
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("port %q: %w", port, err)
	}
	deadline := time.Now().Add(acceptWait)
	for {
		n, err := acceptQueue(p)
		if err != nil || n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the server left %d connections unaccepted for %v", n, acceptWait)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Millisecond):
		}
	}
}

// acceptWait bounds awaitAccepted.
const acceptWait = 10 * time.Second

func (c *client) close() { c.http.CloseIdleConnections() }

// turnResult is what the stream of one turn showed.
type turnResult struct {
	// FirstEvent is the time from sending the request to the first SSE
	// event; Wall the time to the end of the stream.
	FirstEvent time.Duration
	Wall       time.Duration
	SessionID  string
	PlanID     string
	Err        error
}

// frame is the part of an event's JSON the benchmark checks. Fields are
// decoded by event type, since the same name has different shapes in
// different events (error is an object in `error`, a string in
// `tool_result`).
type frame struct {
	Type           string          `json:"type"`
	FinishedReason string          `json:"finished_reason"`
	SessionID      string          `json:"session_id"`
	PlanID         string          `json:"plan_id"`
	Status         string          `json:"status"`
	Completed      int             `json:"completed"`
	Failed         int             `json:"failed"`
	Skipped        int             `json:"skipped"`
	Step           json.RawMessage `json:"step"`
	Error          json.RawMessage `json:"error"`
}

// turn runs one chat turn over SSE, on a connection of the client's
// transport, and checks its stream (readStream).
func (c *client) turn(ctx context.Context, w workload) (r turnResult) {
	ctx, cancel := context.WithTimeout(ctx, turnTimeout)
	defer cancel()
	req, err := c.request(ctx, w)
	if err != nil {
		r.Err = err
		return r
	}
	start := time.Now()
	defer func() { r.Wall = time.Since(start) }()
	resp, err := c.http.Do(req)
	if err != nil {
		r.Err = err
		return r
	}
	defer resp.Body.Close()
	readStream(resp, w, start, &r)
	return r
}

// turnTimeout bounds one turn.
const turnTimeout = 2 * time.Minute

// request is a turn's POST /api/agent/stream.
func (c *client) request(ctx context.Context, w workload) (*http.Request, error) {
	body, _ := json.Marshal(map[string]any{"message": w.message()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/agent/stream", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	return req, nil
}

// shotTurn is one turn of a concurrent shot, made ready before the shot on
// a connection dialed before it: its request is already bytes, written in
// one write when the shot starts, and its answer is read from the same
// connection with http.ReadResponse. The transport's way — a goroutine
// that writes and one that reads per connection, handed the request and
// the response over channels — cost the driver, on the two cores it shares
// with the server, some 30 % of W4's p99 time to first event (0.72× in five
// alternations): the server flushed first events within a millisecond of
// their handlers' start, and the driver read them up to 200 ms later.
type shotTurn struct {
	conn net.Conn
	req  *http.Request
	raw  []byte
}

// prepareTurn makes a turn of workload w ready on conn, which it then
// owns (run closes it).
func (c *client) prepareTurn(ctx context.Context, w workload, conn net.Conn) (*shotTurn, error) {
	req, err := c.request(ctx, w)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	if err := req.Write(&raw); err != nil {
		return nil, err
	}
	return &shotTurn{conn: conn, req: req, raw: raw.Bytes()}, nil
}

// run writes the turn's request, reads its stream and checks it as turn
// does, then closes its connection.
func (t *shotTurn) run(ctx context.Context, w workload) (r turnResult) {
	defer t.conn.Close()
	_ = t.conn.SetDeadline(time.Now().Add(turnTimeout))
	stop := context.AfterFunc(ctx, func() { _ = t.conn.SetDeadline(time.Now()) })
	defer stop()
	start := time.Now()
	defer func() { r.Wall = time.Since(start) }()
	if _, err := t.conn.Write(t.raw); err != nil {
		r.Err = fmt.Errorf("send the request: %w", err)
		return r
	}
	resp, err := http.ReadResponse(bufio.NewReader(t.conn), t.req)
	if err != nil {
		r.Err = fmt.Errorf("read the response: %w", err)
		return r
	}
	defer resp.Body.Close()
	readStream(resp, w, start, &r)
	return r
}

// readStream reads a turn's answer, whose request was sent at start, and
// checks its stream into r: status 200, no error event, done last with
// finished_reason completed, and for a plan workload one plan_complete
// with every step completed and a step_complete per step.
func readStream(resp *http.Response, w workload, start time.Time, r *turnResult) {
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		r.Err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		return
	}
	var (
		problems      []string
		last          string
		done          *frame
		planDone      *frame
		stepsComplete int
	)
	for ev, err := range sse.Read(resp.Body, nil) {
		if err != nil {
			r.Err = fmt.Errorf("reading the stream after %q: %w", last, err)
			return
		}
		if r.FirstEvent == 0 {
			r.FirstEvent = time.Since(start)
		}
		var f frame
		if err := json.Unmarshal([]byte(ev.Data), &f); err != nil {
			problems = append(problems, fmt.Sprintf("event %q is not JSON: %v", ev.Type, err))
			continue
		}
		if f.Type != ev.Type {
			problems = append(problems, fmt.Sprintf("event %q has type %q in its data", ev.Type, f.Type))
		}
		if done != nil {
			problems = append(problems, fmt.Sprintf("event %q after done", ev.Type))
		}
		last = ev.Type
		switch ev.Type {
		case "error":
			problems = append(problems, "error event: "+string(f.Error))
		case "done":
			done = &f
		case "plan_complete":
			if planDone != nil {
				problems = append(problems, "two plan_complete events")
			}
			planDone = &f
		case "step_complete":
			var step struct{ Status string }
			_ = json.Unmarshal(f.Step, &step)
			if step.Status == "completed" {
				stepsComplete++
			}
		}
	}
	switch {
	case done == nil:
		problems = append(problems, fmt.Sprintf("the stream ended without done (last event %q)", last))
	case done.FinishedReason != "completed":
		problems = append(problems, fmt.Sprintf("the turn ended %q, want completed", done.FinishedReason))
	default:
		r.SessionID = done.SessionID
	}
	if w.Plan {
		switch {
		case planDone == nil:
			problems = append(problems, "no plan_complete event")
		case planDone.Status != "completed" || planDone.Completed != planSteps || planDone.Failed+planDone.Skipped != 0:
			problems = append(problems, fmt.Sprintf("the plan ended %s with %d of %d steps completed (%d failed, %d skipped)",
				planDone.Status, planDone.Completed, planSteps, planDone.Failed, planDone.Skipped))
		default:
			r.PlanID = planDone.PlanID
		}
		if stepsComplete != planSteps {
			problems = append(problems, fmt.Sprintf("%d step_complete events with status completed, want %d", stepsComplete, planSteps))
		}
	} else if planDone != nil {
		problems = append(problems, "a plan ran in a turn that should answer at once")
	}
	if len(problems) > 0 {
		r.Err = errors.New(strings.Join(problems, "; "))
	}
}

// verify reads what a turn left in the database over the API: the session
// ends with the expected answer, stored as completed, and for a plan
// workload the plan and all 12 steps are completed, each by one completed
// execution that called the work tool once.
func (c *client) verify(ctx context.Context, w workload, r turnResult) error {
	var sess struct {
		Messages []struct {
			Role           string `json:"role"`
			Content        string `json:"content"`
			FinishedReason string `json:"finished_reason"`
			PlanID         string `json:"plan_id"`
		} `json:"messages"`
	}
	if err := c.get(ctx, "/api/sessions/"+r.SessionID, &sess); err != nil {
		return err
	}
	want := directAnswer
	if w.Plan {
		want = finalAnswer
	}
	n := len(sess.Messages)
	if n == 0 {
		return fmt.Errorf("session %s has no messages", r.SessionID)
	}
	if m := sess.Messages[n-1]; m.Role != "assistant" || !strings.HasSuffix(m.Content, want) {
		return fmt.Errorf("session %s ends with %s %q, want the assistant's answer ending %q", r.SessionID, m.Role, textcut.Cut(m.Content, 200), want)
	}
	if m := sess.Messages[len(sess.Messages)-1]; m.FinishedReason != "" && m.FinishedReason != "completed" {
		return fmt.Errorf("session %s: the answer is stored as %q", r.SessionID, m.FinishedReason)
	}
	if !w.Plan {
		return nil
	}
	var plan struct {
		Plan struct {
			Status string `json:"status"`
			Steps  []struct {
				Number int    `json:"number"`
				Status string `json:"status"`
			} `json:"steps"`
		} `json:"plan"`
		Executions []struct {
			StepNumber int    `json:"step_number"`
			Status     string `json:"status"`
			ToolCalls  int    `json:"tool_calls"`
		} `json:"executions"`
	}
	if err := c.get(ctx, "/api/plans/"+r.PlanID, &plan); err != nil {
		return err
	}
	var problems []string
	if plan.Plan.Status != "completed" {
		problems = append(problems, "status "+plan.Plan.Status)
	}
	completed := 0
	for _, s := range plan.Plan.Steps {
		if s.Status == "completed" {
			completed++
		}
	}
	if len(plan.Plan.Steps) != planSteps || completed != planSteps {
		problems = append(problems, fmt.Sprintf("%d of %d steps completed, want %d of %d", completed, len(plan.Plan.Steps), planSteps, planSteps))
	}
	good := 0
	for _, e := range plan.Executions {
		if e.Status == "completed" && e.ToolCalls == 1 {
			good++
		}
	}
	if len(plan.Executions) != planSteps || good != planSteps {
		problems = append(problems, fmt.Sprintf("%d executions, %d of them completed with one tool call, want %d", len(plan.Executions), good, planSteps))
	}
	if len(problems) > 0 {
		return fmt.Errorf("plan %s: %s", r.PlanID, strings.Join(problems, "; "))
	}
	return nil
}

// get reads path's JSON into into.
func (c *client) get(ctx context.Context, path string, into any) error {
	data, err := c.read(ctx, path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

// read GETs path and returns its body; a status other than 200 is an error.
func (c *client) read(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}
