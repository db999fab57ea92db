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
