// Server-Sent Events over fetch: EventSource can neither POST nor send an
// Authorization header, so streams are read from a fetch body and parsed
// here, following the SSE parsing rules (fields id, event, data; comment
// lines start with a colon; a blank line ends an event).

export class SSEParser {
  constructor(onFrame) {
    this.onFrame = onFrame; // ({id, event, data}) => void
    this.buf = "";
    this.reset();
    this.lastId = "";
  }

  reset() {
    this.data = [];
    this.event = "";
  }

  // push feeds decoded text; complete lines are handled at once.
  push(text) {
    this.buf += text;
    let start = 0;
    for (;;) {
      const nl = this.buf.slice(start).search(/\r\n|\r|\n/);
      if (nl < 0) break;
      const end = start + nl;
      const line = this.buf.slice(start, end);
      start = end + (this.buf.startsWith("\r\n", end) ? 2 : 1);
      this.line(line);
    }
    this.buf = this.buf.slice(start);
  }

  line(line) {
    if (line === "") {
      if (this.data.length > 0) {
        this.onFrame({ id: this.lastId, event: this.event || "message", data: this.data.join("\n") });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) return; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data": this.data.push(value); break;
      case "event": this.event = value; break;
      case "id": if (!value.includes("\0")) this.lastId = value; break;
      default: break; // retry and unknown fields are ignored
    }
  }
}

// readEvents reads an SSE response body and calls onEvent with each event's
// decoded JSON (the event's fields, with type, seq, ts and source).
export async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new SSEParser((frame) => {
    let ev;
    try {
      ev = JSON.parse(frame.data);
    } catch {
      return; // not an event of ours
    }
    if (!ev.type) ev.type = frame.event;
    onEvent(ev, frame.id);
  });
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser.push(value);
  }
  parser.push("\n\n");
  return parser.lastId;
}
