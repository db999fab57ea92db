package event

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// MarshalJSON writes the wire form: the shared header fields (type, seq, ts,
// source) followed by the payload's own fields at the same level.
func (e Envelope) MarshalJSON() ([]byte, error) {
	if e.Event == nil {
		return nil, fmt.Errorf("event: envelope %d has no event", e.Seq)
	}
	head, err := json.Marshal(header{Type: e.Event.Type(), Seq: e.Seq, TS: e.TS, Source: e.Source})
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(e.Event)
	if err != nil {
		return nil, fmt.Errorf("event: marshal %s: %w", e.Event.Type(), err)
	}
	if bytes.Equal(body, []byte("{}")) {
		return head, nil
	}
	out := make([]byte, 0, len(head)+len(body))
	out = append(out, head[:len(head)-1]...)
	out = append(out, ',')
	return append(out, body[1:]...), nil
}

// Encoded returns e holding data, e's JSON as it is now (what MarshalJSON
// returns for it, or what a store kept of it), so that its frame is written
// without encoding it again: the run log encodes each event once, for its
// row, and its followers write those bytes. The JSON is only used while
// Seq stays the same; whoever changes the event itself must change it
// through a copy without Encoded.
func (e Envelope) Encoded(data []byte) Envelope {
	e.wire, e.wireSeq = data, e.Seq
	return e
}

// JSON returns e's wire form: the JSON it holds (Encoded), else MarshalJSON's.
func (e Envelope) JSON() ([]byte, error) {
	if e.wire != nil && e.wireSeq == e.Seq {
		return e.wire, nil
	}
	return e.MarshalJSON()
}

// UnmarshalJSON reads the wire form written by MarshalJSON.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("event: decode header: %w", err)
	}
	ev, err := DecodePayload(h.Type, data)
	if err != nil {
		return err
	}
	*e = Envelope{Seq: h.Seq, TS: h.TS, Source: h.Source, Event: ev}
	return nil
}

// DecodePayload decodes the payload of an event of type t.
func DecodePayload(t Type, data []byte) (Event, error) {
	dec, ok := registry[t]
	if !ok {
		return nil, fmt.Errorf("event: unknown type %q", t)
	}
	ev, err := dec(data)
	if err != nil {
		return nil, fmt.Errorf("event: decode %s: %w", t, err)
	}
	return ev, nil
}

func decode[T Event](data []byte) (Event, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// Sink receives events. Implementations must be safe for concurrent use.
// Emit may block to apply back-pressure, but must return once ctx is done.
type Sink interface {
	Emit(ctx context.Context, e Envelope)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, e Envelope)

// Emit calls f.
func (f SinkFunc) Emit(ctx context.Context, e Envelope) { f(ctx, e) }

// Discard drops every event.
var Discard Sink = SinkFunc(func(context.Context, Envelope) {})

// Emitter binds a Sink to a Source and a clock: producers call Emit with a
// bare event and the Emitter stamps who sent it and when. The zero Emitter
// discards events. Emitters are values; With returns a copy.
type Emitter struct {
	sink    Sink
	src     Source
	now     func() time.Time
	commits bool // the sink stores events and takes their commits (Commits)
}

// NewEmitter returns an Emitter. A nil sink discards; a nil clock is time.Now.
func NewEmitter(sink Sink, src Source, now func() time.Time) Emitter {
	return Emitter{sink: sink, src: src, now: now}
}

// Emit sends ev to the sink with the emitter's source and the current time.
func (e Emitter) Emit(ctx context.Context, ev Event) {
	if e.sink == nil {
		return
	}
	e.sink.Emit(ctx, Envelope{TS: e.clock()().UTC(), Source: e.src, Event: ev})
}

func (e Emitter) clock() func() time.Time {
	if e.now != nil {
		return e.now
	}
	return time.Now
}

// Source returns the emitter's source.
func (e Emitter) Source() Source { return e.src }

// Sink returns the emitter's sink (nil for the zero Emitter).
func (e Emitter) Sink() Sink { return e.sink }

// WithSink returns an Emitter with the same source and clock and another
// sink (a tee that observes what passes, say).
func (e Emitter) WithSink(s Sink) Emitter {
	e.sink = s
	return e
}

// With returns an Emitter with the same sink and clock and a new source.
func (e Emitter) With(src Source) Emitter {
	e.src = src
	return e
}

// Recorder is a Sink that keeps every event, for tests and replays.
type Recorder struct {
	mu     sync.Mutex
	events []Envelope
}

// Emit records e.
func (r *Recorder) Emit(_ context.Context, e Envelope) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of the recorded events in emission order.
func (r *Recorder) Events() []Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Envelope(nil), r.events...)
}

// Types returns the types of the recorded events in order.
func (r *Recorder) Types() []Type {
	evs := r.Events()
	out := make([]Type, len(evs))
	for i, e := range evs {
		out[i] = e.Event.Type()
	}
	return out
}
