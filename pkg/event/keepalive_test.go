package event_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/pkg/event"
)

// message is one event as a client library hands it to its user.
type message struct{ id, event, data string }

// splitLines splits an event stream into lines at CRLF, CR or LF, as every
// SSE parser does; a last line without its end is dropped (it is not
// complete yet).
func splitLines(stream []byte) []string {
	var lines []string
	s := string(stream)
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return lines
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
}

// fetchEventSource parses a stream like @microsoft/fetch-event-source 2.0.1
// (src/parse.ts, getMessages): every blank line dispatches the message
// gathered so far, even when it has no field at all — the library's known
// bug (Azure/fetch-event-source#15). Lines starting with ':' and lines
// without a colon are skipped.
func fetchEventSource(stream []byte) []message {
	var out []message
	var m message
	for _, line := range splitLines(stream) {
		if line == "" {
			out = append(out, m)
			m = message{}
			continue
		}
		field, value, ok := strings.Cut(line, ":")
		if !ok || field == "" {
			continue
		}
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if m.data != "" {
				value = m.data + "\n" + value
			}
			m.data = value
		case "event":
			m.event = value
		case "id":
			m.id = value
		}
	}
	return out
}

// httpxSSE parses a stream like httpx-sse 0.4 (_decoders.py, SSEDecoder):
// a blank line dispatches unless event, data, the last event id and retry
// are all empty — and the last event id is never reset, so after the first
// event with an id every blank line dispatches (florimondmanca/httpx-sse#35).
func httpxSSE(stream []byte) []message {
	var out []message
	var event, lastID string
	var data []string
	for _, line := range splitLines(stream) {
		if line == "" {
			if event == "" && data == nil && lastID == "" {
				continue
			}
			out = append(out, message{id: lastID, event: event, data: strings.Join(data, "\n")})
			event, data = "", nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			data = append(data, value)
		case "id":
			if !strings.ContainsRune(value, 0) {
				lastID = value
			}
		}
	}
	return out
}

// goSSE parses a stream with a spec-conforming parser (tmaxmax/go-sse).
func goSSE(t *testing.T, stream []byte) []message {
	t.Helper()
	var out []message
	for ev, err := range sse.Read(bytes.NewReader(stream), nil) {
		require.NoError(t, err)
		out = append(out, message{id: ev.LastEventID, event: ev.Type, data: ev.Data})
	}
	return out
}

// recordStream writes what a quiet stream of two events is, as the API's
// run streams write it (event.WriteFrame, event.WriteComment): keep-alives
// before, between and after the two frames.
func recordStream(t *testing.T) []byte {
	t.Helper()
	var out bytes.Buffer
	keepAlives := func(n int) {
		for range n {
			require.NoError(t, event.WriteComment(&out, "keep-alive"))
		}
	}
	keepAlives(1)
	require.NoError(t, event.WriteFrame(&out, event.Envelope{Seq: 1, Source: event.Source{Role: event.RoleSystem},
		Event: event.AgentState{State: event.StateThinking}}))
	keepAlives(2)
	require.NoError(t, event.WriteFrame(&out, event.Envelope{Seq: 2, Source: event.Source{Role: event.RoleSystem},
		Event: event.Done{FinishedReason: event.FinishedCompleted}}))
	keepAlives(2)
	return out.Bytes()
}

// TestKeepAliveFramingParsesCleanly pins the keep-alive framing on a
// recorded byte stream: the two client libraries with known bugs around
// keep-alive comments, and a spec-conforming parser, each see exactly the
// two events, with no empty message.
func TestKeepAliveFramingParsesCleanly(t *testing.T) {
	t.Parallel()
	stream := recordStream(t)
	require.Contains(t, string(stream), "\n\n: keep-alive\n: keep-alive\n", "keep-alives follow a frame, one line each")
	require.NotContains(t, string(stream), ": keep-alive\n\n", "a keep-alive is never followed by a blank line")
	require.True(t, strings.HasPrefix(string(stream), ": keep-alive\n"))

	parsers := map[string]func([]byte) []message{
		"fetch-event-source": fetchEventSource,
		"httpx-sse":          httpxSSE,
		"go-sse":             func(b []byte) []message { return goSSE(t, b) },
	}
	for name, parse := range parsers {
		msgs := parse(stream)
		require.Len(t, msgs, 2, "%s: %q", name, msgs)
		for i, m := range msgs {
			require.Equal(t, strconv.Itoa(i+1), m.id, name)
			require.NotEmpty(t, m.data, name)
		}
		require.Equal(t, "agent_state", msgs[0].event, name)
		require.Equal(t, "done", msgs[1].event, name)
	}

	// The framing most servers use, a comment and a blank line, is what
	// the two libraries turn into empty messages: the ports above are
	// faithful to the bugs the framing avoids.
	old := bytes.ReplaceAll(stream, []byte(": keep-alive\n"), []byte(": keep-alive\n\n"))
	require.Greater(t, len(fetchEventSource(old)), 2)
	require.Greater(t, len(httpxSSE(old)), 2)
	require.Len(t, goSSE(t, old), 2)
}
