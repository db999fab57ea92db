package llm

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// StatusRecorder is an http.RoundTripper that remembers, for each model
// call attempt, the HTTP status and Retry-After of the provider's last
// answer, which langchaingo's errors do not expose. Give it to the
// provider's HTTP client and to ClientConfig.Recorder.
type StatusRecorder struct {
	next http.RoundTripper
	now  func() time.Time
}

// NewStatusRecorder wraps next (http.DefaultTransport when nil).
func NewStatusRecorder(next http.RoundTripper) *StatusRecorder {
	if next == nil {
		next = http.DefaultTransport
	}
	return &StatusRecorder{next: next, now: time.Now}
}

type attemptKey struct{}

type attemptRecord struct {
	mu         sync.Mutex
	status     int
	retryAfter time.Duration
}

func (a *attemptRecord) result() (int, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status, a.retryAfter
}

func (r *StatusRecorder) track(ctx context.Context) (context.Context, *attemptRecord) {
	rec := &attemptRecord{}
	return context.WithValue(ctx, attemptKey{}, rec), rec
}

// RoundTrip implements http.RoundTripper.
func (r *StatusRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if rec, ok := req.Context().Value(attemptKey{}).(*attemptRecord); ok {
		rec.mu.Lock()
		rec.status = resp.StatusCode
		rec.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), r.now())
		rec.mu.Unlock()
	}
	return resp, nil
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
