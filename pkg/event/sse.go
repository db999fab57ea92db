package event

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteFrame writes e as one SSE frame: `id: <seq>`, `event: <type>`,
// `data: <json>` and a blank line. JSON never contains a raw newline, so the
// data fits one `data:` line.
func WriteFrame(w io.Writer, e Envelope) error {
	return WriteFrameID(w, strconv.FormatInt(e.Seq, 10), e)
}

// WriteFrameID writes e as one SSE frame with the given id (a plan's
// history uses ids of the form <run>:<seq>).
func WriteFrameID(w io.Writer, id string, e Envelope) error {
	if strings.ContainsAny(id, "\r\n") {
		return fmt.Errorf("event: id %q spans lines", id)
	}
	data, err := e.JSON()
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(data)+48)
	buf = append(buf, "id: "...)
	buf = append(buf, id...)
	buf = append(buf, "\nevent: "...)
	buf = append(buf, e.Event.Type()...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	_, err = w.Write(buf)
	return err
}

// WriteComment writes one SSE comment line, `: <text>` and a newline,
// between two frames (used for keep-alives). It deliberately writes no
// blank line after it: a blank line ends an event, and two widely used
// clients dispatch an empty message for a block that holds only a comment
// (@microsoft/fetch-event-source calls onmessage on every blank line;
// httpx-sse dispatches once a stream has had an id, because it counts the
// sticky last event id as content). A comment line alone changes no parser
// state, so every parser — those two, and spec-conforming ones — skips it,
// and the next frame parses as if it were not there.
func WriteComment(w io.Writer, text string) error {
	if strings.ContainsAny(text, "\r\n") {
		return fmt.Errorf("event: comment %q spans lines", text)
	}
	_, err := io.WriteString(w, ": "+text+"\n")
	return err
}
