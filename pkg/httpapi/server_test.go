package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/httpapi"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fakeDB is a Pinger whose answer a test chooses.
type fakeDB struct {
	PingFunc func(ctx context.Context) error
}

func (f fakeDB) Ping(ctx context.Context) error { return f.PingFunc(ctx) }

var healthyDB = fakeDB{PingFunc: func(context.Context) error { return nil }}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes the JSON log lines.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

type bundle struct {
	srv *httpapi.Server
	log *syncBuffer
}

// setup builds a server on a healthy fake database; mutate adjusts its Config.
func setup(t *testing.T, mutate func(c *httpapi.Config)) bundle {
	t.Helper()
	log := &syncBuffer{}
	cfg := httpapi.Config{
		Addr:   "127.0.0.1:0",
		DB:     healthyDB,
		Logger: zerolog.New(log).Level(zerolog.DebugLevel),
		NewID:  func() string { return "generated-id" },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := httpapi.New(cfg)
	require.NoError(t, err)
	return bundle{srv: srv, log: log}
}

// do serves one request in memory, for Host 127.0.0.1:8080 unless header
// names another.
func (b bundle) do(t *testing.T, method, path string, body io.Reader, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, body)
	req.Host = "127.0.0.1:8080"
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	rec := httptest.NewRecorder()
	b.srv.Handler().ServeHTTP(rec, req)
	return rec
}

func decodeError(t *testing.T, rec *httptest.ResponseRecorder) httpapi.ErrorDetail {
	t.Helper()
	require.Equal(t, echo.MIMEApplicationJSON, rec.Header().Get(echo.HeaderContentType), rec.Body.String())
	var body httpapi.ErrorResponse
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&body))
	return body.Error
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(c *httpapi.Config)
		want   string
	}{
		{"no addr", func(c *httpapi.Config) { c.Addr = "" }, "httpapi: Config.Addr is required"},
		{"bad addr", func(c *httpapi.Config) { c.Addr = "nowhere" }, `httpapi: Config.Addr "nowhere"`},
		{"no db", func(c *httpapi.Config) { c.DB = nil }, "httpapi: Config.DB is required"},
		{"negative timeout", func(c *httpapi.Config) { c.IdleTimeout = -time.Second }, "httpapi: Config.IdleTimeout must not be negative"},
		{"negative body", func(c *httpapi.Config) { c.MaxBodyBytes = -1 }, "httpapi: Config.MaxBodyBytes must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := httpapi.Config{Addr: "127.0.0.1:0", DB: healthyDB}
			tc.mutate(&cfg)
			_, err := httpapi.New(cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *httpapi.Config) {
		c.DB = fakeDB{PingFunc: func(context.Context) error { return errors.New("down") }}
	})
	rec := b.do(t, http.MethodGet, "/healthz", nil, nil)
	require.Equal(t, http.StatusOK, rec.Code, "liveness does not depend on the database")
	require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		ping func(ctx context.Context) error
		want int
	}{
		{"database answers", func(context.Context) error { return nil }, http.StatusOK},
		{"database fails", func(context.Context) error { return errors.New("dial tcp 10.0.0.1:5432: secret detail") }, http.StatusServiceUnavailable},
		{"database hangs", func(ctx context.Context) error {
			deadline, ok := ctx.Deadline()
			if !ok || time.Until(deadline) > httpapi.DefaultReadyTimeout {
				return nil // a ping without the 1 s bound would wrongly pass as ready
			}
			<-ctx.Done()
			return ctx.Err()
		}, http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *httpapi.Config) { c.DB = fakeDB{PingFunc: tc.ping} })
			rec := b.do(t, http.MethodGet, "/readyz", nil, nil)
			require.Equal(t, tc.want, rec.Code)
			if tc.want == http.StatusOK {
				require.JSONEq(t, `{"status":"ready"}`, rec.Body.String())
				return
			}
			require.Equal(t, httpapi.ErrorDetail{Code: "unavailable", Message: "database is not ready"}, decodeError(t, rec))
			require.NotContains(t, rec.Body.String(), "secret")
		})
	}
}

func TestRoutingErrorsAreJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	rec := b.do(t, http.MethodGet, "/no/such/route", nil, nil)
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, httpapi.ErrorDetail{Code: "not_found", Message: "Not Found"}, decodeError(t, rec))

	rec = b.do(t, http.MethodPost, "/healthz", strings.NewReader("{}"), nil)
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, httpapi.ErrorDetail{Code: "method_not_allowed", Message: "Method Not Allowed"}, decodeError(t, rec))
	require.Contains(t, rec.Header().Get("Allow"), http.MethodGet)

	rec = b.do(t, http.MethodHead, "/no/such/route", nil, nil)
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Empty(t, rec.Body.String())
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	fields := []apperr.FieldError{{Field: "message", Message: "is required"}, {Field: "plan_mode", Message: "unknown mode \"x\""}}
	cases := []struct {
		name   string
		err    error
		status int
		want   httpapi.ErrorDetail
	}{
		{"invalid with fields", apperr.Invalidf(fields, "invalid request"), 400, httpapi.ErrorDetail{Code: "invalid_input", Message: "invalid request", Fields: fields}},
		{"unauthorized", apperr.New(apperr.Unauthorized, "missing API key"), 401, httpapi.ErrorDetail{Code: "unauthorized", Message: "missing API key"}},
		{"not found, wrapped", errors.Join(errors.New("ctx"), apperr.New(apperr.NotFound, "plan not found")), 404, httpapi.ErrorDetail{Code: "not_found", Message: "plan not found"}},
		{"conflict", apperr.New(apperr.Conflict, "plan is running"), 409, httpapi.ErrorDetail{Code: "conflict", Message: "plan is running"}},
		{"too large", apperr.New(apperr.TooLarge, "message too long"), 413, httpapi.ErrorDetail{Code: "too_large", Message: "message too long"}},
		{"too many", apperr.New(apperr.TooMany, "4 streams open"), 429, httpapi.ErrorDetail{Code: "too_many_requests", Message: "4 streams open"}},
		{"unavailable", apperr.Wrap(apperr.Unavailable, errors.New("pool closed"), "shutting down"), 503, httpapi.ErrorDetail{Code: "unavailable", Message: "shutting down"}},
		{"coded internal hides its message", apperr.Wrap(apperr.Internal, errors.New("disk full"), "write failed at /var/x"), 500, httpapi.ErrorDetail{Code: "internal", Message: "internal error"}},
		{"plain error", errors.New("pq: relation \"x\" does not exist"), 500, httpapi.ErrorDetail{Code: "internal", Message: "internal error"}},
		{"echo client error", echo.NewHTTPError(http.StatusBadRequest, "Syntax error: offset=3"), 400, httpapi.ErrorDetail{Code: "invalid_input", Message: "Syntax error: offset=3"}},
		{"forbidden", apperr.New(apperr.Forbidden, "only alice can approve it"), 403, httpapi.ErrorDetail{Code: "forbidden", Message: "only alice can approve it"}},
		{"unsupported", apperr.New(apperr.Unsupported, "not JSON"), 415, httpapi.ErrorDetail{Code: "unsupported_media_type", Message: "not JSON"}},
		{"misdirected", apperr.New(apperr.Misdirected, "not served here"), 421, httpapi.ErrorDetail{Code: "misdirected_request", Message: "not served here"}},
		{"echo unsupported media", echo.ErrUnsupportedMediaType, 415, httpapi.ErrorDetail{Code: "unsupported_media_type", Message: "Unsupported Media Type"}},
		{"echo server error hides its message", echo.NewHTTPError(http.StatusBadGateway, "upstream 10.0.0.3 said no"), 502, httpapi.ErrorDetail{Code: "internal", Message: "internal error"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *httpapi.Config) {
				c.Routes = []httpapi.Routes{func(e *echo.Echo) {
					e.GET("/fail", func(echo.Context) error { return tc.err })
				}}
			})
			rec := b.do(t, http.MethodGet, "/fail", nil, http.Header{"X-Request-Id": {"req-42"}})
			require.Equal(t, tc.status, rec.Code)
			require.Equal(t, tc.want, decodeError(t, rec))
			if tc.status == http.StatusUnauthorized {
				require.Equal(t, "Bearer", rec.Header().Get("WWW-Authenticate"))
			}
			if tc.status == http.StatusTooManyRequests {
				require.Equal(t, strconv.Itoa(httpapi.RetryAfterSeconds), rec.Header().Get("Retry-After"))
			} else {
				require.Empty(t, rec.Header().Get("Retry-After"))
			}
			if tc.status >= 500 {
				logs := b.log.String()
				require.Contains(t, logs, `"request_id":"req-42"`)
				require.Contains(t, logs, jsonString(t, tc.err.Error()), "the cause is logged")
			}
		})
	}
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return strings.Trim(string(b), `"`)
}

func TestPanicBecomesOpaque500(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *httpapi.Config) {
		c.Routes = []httpapi.Routes{func(e *echo.Echo) {
			e.GET("/boom", func(echo.Context) error { panic("secret: token sk-123 leaked") })
		}}
	})
	rec := b.do(t, http.MethodGet, "/boom", nil, nil)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, httpapi.ErrorDetail{Code: "internal", Message: "internal error"}, decodeError(t, rec))
	require.NotContains(t, rec.Body.String(), "sk-123")

	logs := b.log.lines(t)
	var failed, request map[string]any
	for _, l := range logs {
		switch l["message"] {
		case "request failed":
			failed = l
		case "request":
			request = l
		}
	}
	require.NotNil(t, failed, b.log.String())
	require.Contains(t, failed["error"], "sk-123", "the panic value is logged")
	require.Contains(t, failed["stack"], "server_test.go", "the stack is logged")
	require.Equal(t, "generated-id", failed["request_id"])
	require.NotNil(t, request)
	require.EqualValues(t, 500, request["status"])
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *httpapi.Config) {
		c.MaxBodyBytes = 16
		c.Routes = []httpapi.Routes{func(e *echo.Echo) {
			e.POST("/echo", func(c echo.Context) error {
				body, err := io.ReadAll(c.Request().Body)
				if err != nil {
					return err
				}
				return c.String(http.StatusOK, string(body))
			})
		}}
	})
	jsonBody := http.Header{"Content-Type": {"application/json"}}
	rec := b.do(t, http.MethodPost, "/echo", strings.NewReader("small"), jsonBody)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "small", rec.Body.String())

	// Declared too large: rejected before the handler runs.
	rec = b.do(t, http.MethodPost, "/echo", strings.NewReader(strings.Repeat("x", 17)), jsonBody)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Equal(t, httpapi.ErrorDetail{Code: "too_large", Message: "request body is larger than 16 bytes"}, decodeError(t, rec))

	// Undeclared length (chunked): the read fails at the limit.
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/echo", io.MultiReader(strings.NewReader(strings.Repeat("x", 40))))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	rec2 := httptest.NewRecorder()
	b.srv.Handler().ServeHTTP(rec2, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec2.Code)
	require.Equal(t, httpapi.ErrorDetail{Code: "too_large", Message: "request body is larger than 16 bytes"}, decodeError(t, rec2))
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	var seen []string
	var mu sync.Mutex
	b := setup(t, func(c *httpapi.Config) {
		c.Routes = []httpapi.Routes{func(e *echo.Echo) {
			e.GET("/id", func(c echo.Context) error {
				mu.Lock()
				seen = append(seen, httpapi.RequestIDFromContext(c.Request().Context()))
				mu.Unlock()
				return c.String(http.StatusOK, httpapi.RequestID(c))
			})
		}}
	})
	cases := []struct {
		incoming string
		want     string
	}{
		{"", "generated-id"},
		{"abc-123", "abc-123"},
		{"has space", "generated-id"},
		{"line\nbreak", "generated-id"},
		{strings.Repeat("a", 129), "generated-id"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
	}
	for _, tc := range cases {
		h := http.Header{}
		if tc.incoming != "" {
			h["X-Request-Id"] = []string{tc.incoming}
		}
		rec := b.do(t, http.MethodGet, "/id", nil, h)
		require.Equal(t, tc.want, rec.Body.String(), "incoming %q", tc.incoming)
		require.Equal(t, tc.want, rec.Header().Get("X-Request-Id"))
	}
	require.Len(t, seen, len(cases))
	for i, tc := range cases {
		require.Equal(t, tc.want, seen[i], "the request context carries the id")
	}
	// An error response carries the id too.
	rec := b.do(t, http.MethodGet, "/missing", nil, http.Header{"X-Request-Id": {"err-1"}})
	require.Equal(t, "err-1", rec.Header().Get("X-Request-Id"))
}

func TestOneLogLinePerRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.do(t, http.MethodGet, "/healthz", nil, nil)
	b.do(t, http.MethodGet, "/nope", nil, http.Header{"X-Request-Id": {"r-2"}, "X-Forwarded-For": {"6.6.6.6"}})
	var lines []map[string]any
	for _, l := range b.log.lines(t) {
		if l["message"] == "request" {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 2)
	require.Equal(t, "/healthz", lines[0]["path"])
	require.EqualValues(t, 200, lines[0]["status"])
	require.Equal(t, "debug", lines[0]["level"], "probes log at debug")
	require.Equal(t, "/nope", lines[1]["path"])
	require.EqualValues(t, 404, lines[1]["status"])
	require.Equal(t, "r-2", lines[1]["request_id"])
	require.Equal(t, "info", lines[1]["level"])
	require.Equal(t, "192.0.2.1", lines[1]["remote"], "the peer address, not a forgeable header")
}

// blockingRoute registers GET /block, which signals entered and answers once
// release is closed, or fails when its request is cancelled.
func blockingRoute(entered chan<- struct{}, release <-chan struct{}) httpapi.Routes {
	return func(e *echo.Echo) {
		e.GET("/block", func(c echo.Context) error {
			entered <- struct{}{}
			select {
			case <-release:
				return c.String(http.StatusOK, "finished")
			case <-c.Request().Context().Done():
				return c.Request().Context().Err()
			}
		})
	}
}

func TestShutdownLetsInFlightRequestsFinish(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	b := setup(t, func(c *httpapi.Config) { c.Routes = []httpapi.Routes{blockingRoute(entered, release)} })
	require.NoError(t, b.srv.Start(context.Background()))
	url := "http://" + b.srv.Addr().String()

	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get(url + "/block")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		got <- result{status: resp.StatusCode, body: string(body), err: err}
	}()
	<-entered

	shutdown := make(chan error, 1)
	go func() { shutdown <- b.srv.Shutdown(context.Background()) }()
	<-b.srv.Draining()

	// New connections are refused once draining has begun.
	require.Eventually(t, func() bool {
		conn, err := net.Dial("tcp", b.srv.Addr().String())
		if err == nil {
			_ = conn.Close()
		}
		return err != nil
	}, 10*time.Second, 5*time.Millisecond)
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
	default:
	}

	close(release)
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "finished", r.body)
	require.NoError(t, <-shutdown)
	<-b.srv.Stopped()
	require.NoError(t, b.srv.Err())
}

func TestShutdownPastDeadlineClosesConnections(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	b := setup(t, func(c *httpapi.Config) { c.Routes = []httpapi.Routes{blockingRoute(entered, release)} })
	require.NoError(t, b.srv.Start(context.Background()))

	got := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + b.srv.Addr().String() + "/block")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			_ = resp.Body.Close()
		}
		got <- err
	}()
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the drain window has already elapsed
	err := b.srv.Shutdown(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "drain window elapsed")
	require.Error(t, <-got, "the stuck request's connection was closed")
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.srv.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.srv.Shutdown(context.Background())) })
	require.ErrorContains(t, b.srv.Start(context.Background()), "already started")

	busy := setup(t, func(c *httpapi.Config) { c.Addr = b.srv.Addr().String() })
	err := busy.srv.Start(context.Background())
	require.ErrorContains(t, err, "httpapi: listen on "+b.srv.Addr().String())
	require.NoError(t, busy.srv.Shutdown(context.Background()), "Shutdown without a started server is a no-op")
}
