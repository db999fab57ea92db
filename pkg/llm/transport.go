package llm

import (
	"context"
	"net/http"
	"strings"
	"sync"
)

// A provider's HTTP answer to a failed call (its status and Retry-After) is
// not exposed by langchaingo's errors. statusTransport, which NewProvider
// puts under every provider's HTTP client, writes them into the attempt
// record the Client placed in the request's context; a request without one
// passes through untouched. The record is per attempt, so concurrent calls
// sharing one provider never see each other's answers.
//
// The transport also records the address called (for errors that must name
// it), and puts a streamGuard of the provider's dialect over a streamed
// answer, so a stream cut short or carrying a malformed chunk fails the
// attempt instead of passing for a complete answer.
type statusTransport struct {
	next    http.RoundTripper
	dialect dialect
}

type attemptKey struct{}

// attemptRecord is what the transport saw of one attempt's last answer.
type attemptRecord struct {
	mu         sync.Mutex
	status     int
	retryAfter string
	url        string
	fault      *StreamError
}

func (a *attemptRecord) result() (status int, retryAfter string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status, a.retryAfter
}

func (a *attemptRecord) setFault(err *StreamError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fault = err
}

// called returns the address the attempt called and how its stream broke,
// if it did.
func (a *attemptRecord) called() (url string, fault *StreamError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.url, a.fault
}

// withAttemptRecord returns ctx carrying a fresh record for one attempt.
func withAttemptRecord(ctx context.Context) (context.Context, *attemptRecord) {
	rec := &attemptRecord{}
	return context.WithValue(ctx, attemptKey{}, rec), rec
}

// RoundTrip implements http.RoundTripper.
func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec, ok := req.Context().Value(attemptKey{}).(*attemptRecord)
	if ok {
		rec.mu.Lock()
		rec.url = req.Method + " " + safeURL(req.URL)
		rec.mu.Unlock()
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || !ok {
		return resp, err
	}
	rec.mu.Lock()
	rec.status = resp.StatusCode
	rec.retryAfter = resp.Header.Get("Retry-After")
	rec.mu.Unlock()
	if t.dialect != dialectNone && resp.StatusCode == http.StatusOK &&
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &streamGuard{body: resp.Body, dialect: t.dialect, rec: rec}
	}
	return resp, nil
}

// apiKeyTransport adds Google's API key header (x-goog-api-key), so the
// googleai provider's key never appears in a URL and the model never
// handles it.
type apiKeyTransport struct {
	key  string
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t apiKeyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("x-goog-api-key", t.key)
	return t.next.RoundTrip(req)
}
