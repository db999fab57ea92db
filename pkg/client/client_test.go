package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/planwright/planwright/pkg/client"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{Server: srv.URL + "/", APIKey: "pwk_test"})
	require.NoError(t, err)
	return c
}

func TestNewRefusesWhatIsNotAnHTTPURL(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "localhost:8080", "ftp://x", "http://"} {
		_, err := client.New(client.Config{Server: s})
		require.Error(t, err, s)
	}
}

// Calls send the key and JSON, decode the answer and keep its raw JSON.
func TestJSONCalls(t *testing.T) {
	t.Parallel()
	var got []string
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "Bearer pwk_test", r.Header.Get("Authorization"))
		raw, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		body := string(raw)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/plans":
			fmt.Fprint(w, `{"plans":[{"id":"p1","goal":"g","status":"completed","steps":[],"future_field":1}],"next_cursor":"c2"}`)
		default:
			fmt.Fprint(w, `{"id":"p1","status":"rejected","steps":[]}`)
		}
	})
	list, err := c.Plans(context.Background(), client.PlanQuery{Status: "completed,failed", Limit: 5, Cursor: "c1"})
	require.NoError(t, err)
	require.Equal(t, "p1", list.Plans[0].ID)
	require.Equal(t, "c2", list.NextCursor)
	require.Contains(t, string(list.Raw), "future_field", "the server's JSON is kept whole")
	p, err := c.Reject(context.Background(), "p1", "no")
	require.NoError(t, err)
	require.Equal(t, event.PlanRejected, p.Status)
	require.Equal(t, []string{
		"GET /api/plans?cursor=c1&limit=5&status=completed%2Cfailed ",
		`POST /api/plans/p1/reject {"reason":"no"}`,
	}, got)
}

// Error answers keep the server's words; without a JSON error, the status.
func TestErrors(t *testing.T) {
	t.Parallel()
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/plans/one":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"invalid_input","message":"invalid plan: step 2 depends on step 7","fields":[{"field":"steps","message":"step 2 depends on step 7"}]}}`)
		case "/api/plans/two":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"invalid_input","message":"invalid plan query","fields":[{"field":"status","message":"unknown"},{"field":"mode","message":"unknown"}]}}`)
		default:
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<html>proxy error</html>")
		}
	})
	_, err := c.Plan(context.Background(), "one")
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.Status)
	require.Equal(t, "invalid plan: step 2 depends on step 7", err.Error(), "one field problem: the message already says it")
	require.True(t, client.IsCode(err, "invalid_input"))
	_, err = c.Plan(context.Background(), "two")
	require.Equal(t, "invalid plan query (status: unknown; mode: unknown)", err.Error())
	_, err = c.Plan(context.Background(), "three")
	require.Equal(t, "<html>proxy error</html>", err.Error())
	require.True(t, client.IsCode(err, "http_502"))
}

// A stream is parsed as SSE: comments skipped, events decoded into their
// types, unknown types passed on with their JSON only, done returned.
func TestStream(t *testing.T) {
	t.Parallel()
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "text/event-stream", r.Header.Get("Accept"))
		var req client.TurnRequest
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		require.Equal(t, "hi", req.Message)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": keep-alive\n\n")
		fmt.Fprint(w, "id: 1\nevent: text\ndata: {\"type\":\"text\",\"seq\":1,\"ts\":\"2025-01-01T00:00:00Z\",\"source\":{\"role\":\"planner\"},\"content\":\"Hel\"}\n\n")
		fmt.Fprint(w, "id: 2\nevent: brand_new\ndata: {\"type\":\"brand_new\",\"seq\":2,\"ts\":\"2025-01-01T00:00:00Z\",\"source\":{\"role\":\"system\"}}\n\n")
		fmt.Fprint(w, "id: 3\nevent: done\ndata: {\"type\":\"done\",\"seq\":3,\"ts\":\"2025-01-01T00:00:00Z\",\"source\":{\"role\":\"system\"},\"finished_reason\":\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2,\"total_tokens\":3}}\n\n")
	})
	var types []string
	done, err := c.Turn(context.Background(), client.TurnRequest{Message: "hi"}, func(ev client.Event) {
		if ev.Event == nil {
			types = append(types, "?"+string(ev.Raw[:19]))
			return
		}
		types = append(types, string(ev.Event.Type()))
	})
	require.NoError(t, err)
	require.Equal(t, []string{"text", `?{"type":"brand_new"`, "done"}, types)
	require.Equal(t, event.FinishedCompleted, done.FinishedReason)
	require.Equal(t, 3, done.Usage.TotalTokens)
}

// A stream that answers an error before streaming is that error.
func TestStreamRefused(t *testing.T) {
	t.Parallel()
	c := newClient(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":{"code":"conflict","message":"plan p is completed, not pending_review"}}`)
	})
	_, err := c.Approve(context.Background(), "p", client.ApproveRequest{}, nil)
	require.EqualError(t, err, "plan p is completed, not pending_review")
}

// Every field the client reads is one the server writes, under the same
// JSON name and kind (the server may write more).
func TestTypesMatchTheServer(t *testing.T) {
	t.Parallel()
	pairs := []struct{ client, server any }{
		{client.Me{}, httpapi.Me{}},
		{client.Session{}, httpapi.SessionView{}},
		{client.Message{}, httpapi.MessageView{}},
		{client.SessionList{}, httpapi.SessionList{}},
		{client.SessionDetail{}, httpapi.SessionDetail{}},
		{client.Step{}, httpapi.StepView{}},
		{client.Plan{}, httpapi.PlanView{}},
		{client.Approval{}, httpapi.ApprovalView{}},
		{client.Cancellation{}, httpapi.CancellationView{}},
		{client.PlanList{}, httpapi.PlanList{}},
		{client.Review{}, httpapi.ReviewView{}},
		{client.Execution{}, httpapi.ExecutionView{}},
		{client.PlanDetail{}, httpapi.PlanDetail{}},
		{client.Project{}, httpapi.ProjectView{}},
		{client.TurnRequest{}, httpapi.StreamRequest{}},
		{client.ApproveRequest{}, httpapi.ApproveRequest{}},
	}
	require.Contains(t, fields(reflect.TypeOf(httpapi.StepView{})), "executor_required", "fields of embedded structs count")
	for _, p := range pairs {
		server := fields(reflect.TypeOf(p.server))
		for name, kind := range fields(reflect.TypeOf(p.client)) {
			require.Contains(t, server, name, "%T.%s", p.client, name)
			require.Equal(t, server[name], kind, "%T.%s", p.client, name)
		}
	}
}

// fields maps the JSON names of t's fields, those of embedded structs
// included, to their kinds.
func fields(t reflect.Type) map[string]reflect.Kind {
	out := map[string]reflect.Kind{}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous && f.Tag.Get("json") == "" {
			continue // its fields are listed after it
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || name == "" {
			continue
		}
		k := f.Type.Kind()
		if k == reflect.Pointer {
			k = f.Type.Elem().Kind()
		}
		out[name] = k
	}
	return out
}
