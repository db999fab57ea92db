package event

import (
	"context"
	"io"
	"sync"
	"time"
)

// StreamConfig configures a Stream.
type StreamConfig struct {
	// MaxPending bounds the events waiting for the client (default 256).
	// When it is reached, Emit blocks: structured events are never dropped.
	MaxPending int
	// MaxCoalesced bounds the text of one coalesced text event (default
	// 64 KiB); past it a new text event is queued (and may block).
	MaxCoalesced int
	// KeepAlive is the interval of `: keep-alive` comments (default 15 s).
	KeepAlive time.Duration
}

func (c *StreamConfig) defaults() {
	if c.MaxPending <= 0 {
		c.MaxPending = 256
	}
	if c.MaxCoalesced <= 0 {
		c.MaxCoalesced = 64 << 10
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
}

// Stream is one client's event stream: a Sink whose events a single writer
// (Run) numbers and writes as SSE frames. Its buffer is bounded: when the
// client lags, consecutive text deltas of one source are coalesced into one
// event, and once MaxPending events wait, Emit blocks until the client reads
// or the producer's context ends. Structured events are never dropped while
// the client is connected. Once the writer fails (the client went away),
// Emit discards, so producers never block on a dead client.
//
// A Stream is safe for concurrent use by any number of producers and one
// Run.
type Stream struct {
	cfg StreamConfig

	mu      sync.Mutex
	queue   []Envelope
	closed  bool
	dead    bool
	wake    chan struct{} // signalled when the queue gains an event or closes
	space   chan struct{} // closed and replaced when the writer takes events
	written int64
}

// NewStream returns a Stream.
func NewStream(cfg StreamConfig) *Stream {
	cfg.defaults()
	return &Stream{cfg: cfg, wake: make(chan struct{}, 1), space: make(chan struct{})}
}

// Emit queues e for the client. It blocks while MaxPending events wait,
// until the writer makes room or ctx is done (the event is then dropped).
func (s *Stream) Emit(ctx context.Context, e Envelope) {
	for {
		s.mu.Lock()
		if s.closed || s.dead {
			s.mu.Unlock()
			return
		}
		if s.coalesce(e) {
			s.mu.Unlock()
			return
		}
		if len(s.queue) < s.cfg.MaxPending {
			s.queue = append(s.queue, e)
			s.mu.Unlock()
			s.signal()
			return
		}
		space := s.space
		s.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return
		}
	}
}

// coalesce merges a text delta into the last queued event when that is a
// text delta of the same source. The caller holds s.mu.
func (s *Stream) coalesce(e Envelope) bool {
	t, ok := e.Event.(Text)
	if !ok || len(s.queue) == 0 {
		return false
	}
	last := &s.queue[len(s.queue)-1]
	lt, ok := last.Event.(Text)
	if !ok || last.Source != e.Source || len(lt.Content)+len(t.Content) > s.cfg.MaxCoalesced {
		return false
	}
	last.Event = Text{Content: lt.Content + t.Content}
	last.wire = nil // its JSON changed
	return true
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close ends the stream: Run writes what is queued and returns. Events
// emitted after Close are discarded.
func (s *Stream) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

// Written returns how many events were written so far (the last seq).
func (s *Stream) Written() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written
}

// take removes every queued event and frees the producers waiting for room.
func (s *Stream) take() (batch []Envelope, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch, s.queue = s.queue, nil
	if len(batch) > 0 {
		close(s.space)
		s.space = make(chan struct{})
	}
	return batch, s.closed
}

func (s *Stream) fail() {
	s.mu.Lock()
	s.dead = true
	s.queue = nil
	close(s.space)
	s.space = make(chan struct{})
	s.mu.Unlock()
}

// Run writes events to w as SSE frames, numbering them 1, 2, … and calling
// flush after each batch, with a keep-alive comment whenever the stream has
// been quiet for the keep-alive interval. It returns nil once the stream is
// closed and drained, ctx's cause when ctx ends first, or the write error
// when the client goes away (after which Emit discards).
func (s *Stream) Run(ctx context.Context, w io.Writer, flush func() error) error {
	ticker := time.NewTicker(s.cfg.KeepAlive)
	defer ticker.Stop()
	var seq int64
	for {
		batch, closed := s.take()
		for i := range batch {
			seq++
			batch[i].Seq = seq
			if err := WriteFrame(w, batch[i]); err != nil {
				s.fail()
				return err
			}
		}
		if len(batch) > 0 {
			if err := flush(); err != nil {
				s.fail()
				return err
			}
			s.mu.Lock()
			s.written = seq
			s.mu.Unlock()
			ticker.Reset(s.cfg.KeepAlive)
		}
		if closed {
			// take saw the queue and the close together: everything
			// emitted before Close was in this batch.
			return nil
		}
		select {
		case <-s.wake:
		case <-ticker.C:
			if err := WriteComment(w, "keep-alive"); err != nil {
				s.fail()
				return err
			}
			if err := flush(); err != nil {
				s.fail()
				return err
			}
		case <-ctx.Done():
			s.fail()
			return context.Cause(ctx)
		}
	}
}
