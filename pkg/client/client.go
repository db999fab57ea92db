// Package client talks to a planwright server over its HTTP API: JSON
// calls, and the Server-Sent Event streams of chat turns and plan runs,
// decoded into pkg/event's typed events. Errors the server answers are
// *Error values that keep its own words. The answer types mirror the
// server's views field by field; a plan's steps and the statuses, verdicts
// and modes they hold are pkg/event's (and pkg/planmode's) own types.
//
// A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/pkg/event"
)

// Config says which server to talk to and how.
type Config struct {
	// Server is the server's base URL (http or https). Required.
	Server string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// HTTP is the client used (default: one without a timeout, since
	// streams last as long as their run).
	HTTP *http.Client
	// UserAgent names the caller (default "planwright-client").
	UserAgent string
}

// Client calls one server.
type Client struct {
	base *url.URL
	cfg  Config
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.Server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server %q is not an http(s) URL", cfg.Server)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "planwright-client"
	}
	return &Client{base: u, cfg: cfg}, nil
}

// Server is the base URL the client calls.
func (c *Client) Server() string { return c.base.String() }

// FieldError is one problem of invalid input.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error answer of the server.
type Error struct {
	Status  int
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Fields  []FieldError `json:"fields,omitempty"`
}

// Error is the server's message, with each field problem when there are
// several (the message already names a single one).
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if len(e.Fields) > 1 {
		parts := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			parts[i] = f.Field + ": " + f.Message
		}
		msg += " (" + strings.Join(parts, "; ") + ")"
	}
	return msg
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

func (c *Client) request(ctx context.Context, method, path string, query url.Values, body any, accept string) (*http.Response, error) {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = query.Encode()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("cannot reach %s: %w", c.base, unwrapURL(err))
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, errorOf(resp)
	}
	return resp, nil
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func errorOf(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil {
		body.Error.Status = resp.StatusCode
		return body.Error
	}
	msg := strings.TrimSpace(string(raw))
	if msg == "" || len(msg) > 200 {
		msg = resp.Status
	}
	return &Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: msg}
}

// do calls a JSON route and decodes the answer into out, keeping the raw
// JSON in out's Raw field when it has one.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.request(ctx, method, path, query, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read the answer of %s %s: %w", method, path, err)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	setRaw(out, raw)
	return nil
}

func setRaw(out any, raw []byte) {
	switch v := out.(type) {
	case *Me:
		v.Raw = raw
	case *SessionList:
		v.Raw = raw
	case *SessionDetail:
		v.Raw = raw
	case *Plan:
		v.Raw = raw
	case *PlanList:
		v.Raw = raw
	case *PlanDetail:
		v.Raw = raw
	case *ToolHoldList:
		v.Raw = raw
	}
}

// Event is one event of a stream: Envelope.Event is nil for a type this
// client does not know; Raw is the event's JSON as the server sent it.
type Event struct {
	event.Envelope
	Raw json.RawMessage
}

// Handler receives a stream's events in order.
type Handler func(Event)

// stream calls a route that answers with Server-Sent Events and hands each
// event to h until the stream ends. It returns the stream's done event
// (nil when the stream ended without one).
func (c *Client) stream(ctx context.Context, method, path string, body any, h Handler) (*event.Done, error) {
	resp, err := c.request(ctx, method, path, nil, body, "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return nil, fmt.Errorf("%s %s answered %q, not an event stream", method, path, ct)
	}
	var done *event.Done
	for frame, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: 8 << 20}) {
		if err != nil {
			if ctx.Err() != nil {
				return done, context.Cause(ctx)
			}
			return done, fmt.Errorf("the stream of %s broke: %w", path, err)
		}
		ev := Event{Raw: json.RawMessage(frame.Data)}
		if err := json.Unmarshal([]byte(frame.Data), &ev.Envelope); err != nil {
			ev.Envelope = event.Envelope{} // an event type this client does not know
		}
		if d, ok := ev.Event.(event.Done); ok {
			done = &d
		}
		if h != nil {
			h(ev)
		}
	}
	if ctx.Err() != nil {
		return done, context.Cause(ctx)
	}
	return done, nil
}

// Me says who the key acts as.
func (c *Client) Me(ctx context.Context) (Me, error) {
	var out Me
	return out, c.do(ctx, "GET", "/api/me", nil, nil, &out)
}

// Sessions lists the caller's sessions, most recent first.
func (c *Client) Sessions(ctx context.Context, limit int, cursor string) (SessionList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out SessionList
	return out, c.do(ctx, "GET", "/api/sessions", q, nil, &out)
}

// Session returns a session with its messages.
func (c *Client) Session(ctx context.Context, id string) (SessionDetail, error) {
	var out SessionDetail
	return out, c.do(ctx, "GET", "/api/sessions/"+url.PathEscape(id), nil, nil, &out)
}

// Projects lists the caller's workspace projects.
func (c *Client) Projects(ctx context.Context) ([]Project, error) {
	var out struct {
		Projects []Project `json:"projects"`
	}
	return out.Projects, c.do(ctx, "GET", "/api/projects", nil, nil, &out)
}

// Plans lists plans, newest first.
func (c *Client) Plans(ctx context.Context, pq PlanQuery) (PlanList, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", pq.Status)
	set("mode", pq.Mode)
	set("session_id", pq.SessionID)
	set("user_id", pq.UserID)
	set("cursor", pq.Cursor)
	if !pq.Since.IsZero() {
		q.Set("since", pq.Since.UTC().Format(time.RFC3339))
	}
	if !pq.Until.IsZero() {
		q.Set("until", pq.Until.UTC().Format(time.RFC3339))
	}
	if pq.Limit > 0 {
		q.Set("limit", strconv.Itoa(pq.Limit))
	}
	var out PlanList
	return out, c.do(ctx, "GET", "/api/plans", q, nil, &out)
}

// Plan returns a plan with its reviews and executions.
func (c *Client) Plan(ctx context.Context, id string) (PlanDetail, error) {
	var out PlanDetail
	return out, c.do(ctx, "GET", "/api/plans/"+url.PathEscape(id), nil, nil, &out)
}

// Reject closes a plan waiting for review.
func (c *Client) Reject(ctx context.Context, id, reason string) (Plan, error) {
	var out Plan
	return out, c.do(ctx, "POST", "/api/plans/"+url.PathEscape(id)+"/reject", nil, map[string]string{"reason": reason}, &out)
}

// PendingToolCalls lists the tool calls that wait on the caller
// (operators: on anyone), oldest first.
func (c *Client) PendingToolCalls(ctx context.Context) (ToolHoldList, error) {
	var out ToolHoldList
	return out, c.do(ctx, "GET", "/api/tool-approvals", nil, nil, &out)
}

// RunToolCalls lists a run's tool calls that wait, or waited, on a person.
func (c *Client) RunToolCalls(ctx context.Context, runID string) (ToolHoldList, error) {
	var out ToolHoldList
	return out, c.do(ctx, "GET", "/api/runs/"+url.PathEscape(runID)+"/tool-approvals", nil, nil, &out)
}

// DecideToolCalls takes decisions about a run's held tool calls, all or
// none, and returns the decided calls.
func (c *Client) DecideToolCalls(ctx context.Context, runID string, ds []ToolDecision) (ToolHoldList, error) {
	var out ToolHoldList
	return out, c.do(ctx, "POST", "/api/runs/"+url.PathEscape(runID)+"/tool-approvals", nil,
		map[string]any{"decisions": ds}, &out)
}

// CancelPlan stops a running plan, or closes a waiting one.
func (c *Client) CancelPlan(ctx context.Context, id string) (Plan, error) {
	var out Plan
	return out, c.do(ctx, "POST", "/api/plans/"+url.PathEscape(id)+"/cancel", nil, nil, &out)
}

// Approve approves a plan waiting for review and streams its run.
func (c *Client) Approve(ctx context.Context, id string, req ApproveRequest, h Handler) (*event.Done, error) {
	return c.stream(ctx, "POST", "/api/plans/"+url.PathEscape(id)+"/approve", req, h)
}

// Resume reruns what did not complete of a plan and streams the run.
func (c *Client) Resume(ctx context.Context, id string, h Handler) (*event.Done, error) {
	return c.stream(ctx, "POST", "/api/plans/"+url.PathEscape(id)+"/resume", struct{}{}, h)
}

// RaiseBudget raises the budget of a plan that waits for it (limits: the
// JSON object of the limits to raise) and streams the plan as it continues.
func (c *Client) RaiseBudget(ctx context.Context, id string, limits json.RawMessage, h Handler) (*event.Done, error) {
	return c.stream(ctx, "POST", "/api/plans/"+url.PathEscape(id)+"/budget", limits, h)
}

// Watch streams a plan's events: live while it runs, else its history.
func (c *Client) Watch(ctx context.Context, id string, h Handler) (*event.Done, error) {
	return c.stream(ctx, "GET", "/api/plans/"+url.PathEscape(id)+"/events", nil, h)
}

// Turn runs a chat turn and streams its events.
func (c *Client) Turn(ctx context.Context, req TurnRequest, h Handler) (*event.Done, error) {
	return c.stream(ctx, "POST", "/api/agent/stream", req, h)
}

// CancelTurn asks the server to stop a running turn of the caller.
func (c *Client) CancelTurn(ctx context.Context, streamRunID string) error {
	return c.do(ctx, "POST", "/api/agent/stream/cancel", nil,
		map[string]string{"stream_run_id": streamRunID, "reason": "user_cancelled"}, nil)
}
