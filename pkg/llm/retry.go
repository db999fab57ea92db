package llm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// maxRetryAfter caps how long a provider's Retry-After can make a call wait.
const maxRetryAfter = time.Minute

// errAttemptTimeout is the cause of an attempt's context when CallTimeout
// ends it.
var errAttemptTimeout = errors.New("model call attempt timed out")

// failure is what is known about a failed attempt.
type failure struct {
	status     int
	retryAfter time.Duration
	timeout    bool
	// url is the address called; stream is set when the stream broke.
	url    string
	stream *StreamError
}

// retryable reports whether another attempt may succeed: rate limits,
// server errors, one attempt's timeout and a broken stream are; anything
// else (bad request, authentication, an answer langchaingo cannot read) is
// not.
func (f failure) retryable() bool {
	return f.timeout || f.stream != nil || f.status == http.StatusTooManyRequests || f.status >= 500
}

// classify gathers what is known about err: the status and Retry-After the
// transport recorded (rec may be nil), those an error exposes itself (the
// scripted model's errors do), and whether the attempt, not the caller,
// timed out.
func classify(ctx, actx context.Context, err error, rec *attemptRecord, now time.Time) failure {
	var f failure
	if rec != nil {
		var ra string
		f.status, ra = rec.result()
		f.retryAfter = parseRetryAfter(ra, now)
		f.url, f.stream = rec.called()
	}
	var se interface{ HTTPStatus() int }
	if errors.As(err, &se) {
		f.status = se.HTTPStatus()
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		f.retryAfter = ra.RetryAfter()
	}
	var ne net.Error
	if ctx.Err() == nil && (errors.Is(context.Cause(actx), errAttemptTimeout) || (errors.As(err, &ne) && ne.Timeout())) {
		f.timeout = true
		f.stream = nil // a stream cut by the timeout is the timeout
	}
	return f
}

// backoff is the wait before retry number attempt+1: the provider's
// Retry-After when it sent one (capped at a minute), otherwise base doubled
// per attempt with "equal jitter" (between half and all of it). rnd returns
// a number in [0, 1).
func backoff(base time.Duration, attempt int, retryAfter time.Duration, rnd func() float64) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, maxRetryAfter)
	}
	d := min(base<<attempt, maxRetryAfter)
	return d/2 + time.Duration(rnd()*float64(d/2))
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
// It returns 0 for an absent, malformed or past value.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// sleep waits d or until ctx ends, returning ctx's cause then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
