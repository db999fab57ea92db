package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/pkg/textcut"
)

// client talks to one server as its single user (auth none).
type client struct {
	base string
	http *http.Client
	// open holds connections dialed before a concurrent shot; the
	// transport takes one of them before it dials.
	open chan net.Conn
}

func newClient(base string) *client {
	c := &client{base: base, open: make(chan net.Conn, 1024)}
	var d net.Dialer
	c.http = &http.Client{Transport: &http.Transport{
		MaxIdleConns:        0, // no limit
		MaxIdleConnsPerHost: 1024,
		DisableCompression:  true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			select {
			case conn := <-c.open:
				return conn, nil
			default:
				return d.DialContext(ctx, network, addr)
			}
		},
	}}
	return c
}

// preopen dials n connections to the server before a concurrent shot, as
// n clients that already hold a connection: the shot then measures the
// server, not one process dialing n sockets at once on the cores the
// server runs on.
func (c *client) preopen(ctx context.Context, n int) error {
	u, err := url.Parse(c.base)
	if err != nil {
		return err
	}
	var d net.Dialer
	for range n {
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			return err
		}
		select {
		case c.open <- conn:
		default:
			conn.Close()
			return fmt.Errorf("more than %d connections to open", cap(c.open))
		}
	}
	return nil
}

func (c *client) close() {
	c.http.CloseIdleConnections()
	for {
		select {
		case conn := <-c.open:
			conn.Close()
		default:
			return
		}
	}
}

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

// turn runs one chat turn over SSE and checks its stream: status 200, no
// error event, done last with finished_reason completed, and for a plan
// workload one plan_complete with every step completed and a
// step_complete per step.
func (c *client) turn(ctx context.Context, w workload) (r turnResult) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"message": w.message()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/agent/stream", bytes.NewReader(body))
	if err != nil {
		r.Err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	defer func() { r.Wall = time.Since(start) }()
	resp, err := c.http.Do(req)
	if err != nil {
		r.Err = err
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		r.Err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		return r
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
			return r
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
	return r
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

func (c *client) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, into)
}
