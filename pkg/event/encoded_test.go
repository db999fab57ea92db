package event_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/event"
)

// An envelope holding its JSON (Encoded) is written with those bytes, not
// encoded again; once its seq changes, it is encoded again.
func TestEncodedEnvelopeIsWrittenAsHeld(t *testing.T) {
	t.Parallel()
	e := event.Envelope{Seq: 7, TS: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC), Source: event.Source{Role: event.RolePlanner},
		Event: event.Text{Content: "a <b> & c"}}
	want, err := json.Marshal(e)
	require.NoError(t, err)
	got, err := e.JSON()
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "JSON without Encoded is MarshalJSON's, as json.Marshal writes it")

	held := e.Encoded([]byte(`{"held":true}`))
	var buf bytes.Buffer
	require.NoError(t, event.WriteFrame(&buf, held))
	require.Equal(t, "id: 7\nevent: text\ndata: {\"held\":true}\n\n", buf.String())

	held.Seq = 8
	buf.Reset()
	require.NoError(t, event.WriteFrame(&buf, held))
	require.Contains(t, buf.String(), `"seq":8`, "another seq is encoded again")
	require.Contains(t, buf.String(), `"content":"a \u003cb\u003e \u0026 c"`)
}

// MarshalJSON writes what json.Marshal writes of an envelope — compact,
// HTML escaped, raw arguments compacted — so that the run log, which calls
// it directly (json.Marshal would scan and copy its output once more), stores
// and sends the same bytes.
func TestMarshalJSONIsWhatJSONMarshalWrites(t *testing.T) {
	t.Parallel()
	ts := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	for _, ev := range []event.Event{
		event.Text{Content: "a <b> & c\n\"quoted\""},
		event.ToolCall{ToolCall: event.ToolCallInfo{ID: "c1", Name: "bench.work", Arguments: json.RawMessage("{\n  \"label\": \"<x> & y\"\n}")}},
		event.AgentState{State: event.StateThinking},
		event.Done{FinishedReason: event.FinishedCompleted},
		event.PlanCreated{Plan: event.Plan{ID: "p", Goal: "ship <it>", Steps: []event.PlanStep{{StepDefinition: event.StepDefinition{Number: 1, Title: "one", Args: json.RawMessage(`{ "a" : [1, 2] }`)}}}}},
	} {
		t.Run(string(ev.Type()), func(t *testing.T) {
			t.Parallel()
			e := event.Envelope{Seq: 3, TS: ts, Source: event.Source{Role: event.RoleExecutor, PlanID: "p", StepNumber: 1}, Event: ev}
			want, err := json.Marshal(e)
			require.NoError(t, err)
			got, err := e.MarshalJSON()
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		})
	}
}
