package httpapi

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	sse "github.com/tmaxmax/go-sse"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// failingRunLog is a run log whose reads of a plan's history fail.
type failingRunLog struct {
	RunLog
	runsErr, eventsErr error
}

func (f failingRunLog) PlanRuns(context.Context, string) ([]event.Run, error) {
	if f.runsErr != nil {
		return nil, f.runsErr
	}
	return []event.Run{{ID: "r1"}}, nil
}

func (f failingRunLog) PlanEvents(context.Context, string, []event.Run) ([]event.PlanEvent, error) {
	return nil, f.eventsErr
}

// A read of the store that fails ends a plan's watch with an error event
// and done, and is logged: the client does not take the end of the stream
// for the end of the plan.
func TestPlanWatchEndsWithAnErrorWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	for name, runs := range map[string]failingRunLog{
		"runs":   {runsErr: errors.New("connection reset")},
		"events": {eventsErr: errors.New("connection reset")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			h := &planEvents{deps: deps{now: time.Now, log: zerolog.New(&logs), keepAlive: time.Minute}, runs: runs,
				feed: event.NewFeed(), poll: time.Second}
			rec := httptest.NewRecorder()
			c := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/api/plans/p1/events", nil), rec)
			require.NoError(t, h.watchLog(c, planning.Plan{ID: "p1", Status: planning.StatusExecuting}))

			var types []string
			var last sse.Event
			for ev, err := range sse.Read(rec.Body, nil) {
				require.NoError(t, err)
				types = append(types, ev.Type)
				last = ev
				if ev.Type == string(event.TypeError) {
					require.Contains(t, ev.Data, `"code":"internal"`, "the store's error is not shown to the client")
					require.NotContains(t, ev.Data, "connection reset")
				}
			}
			require.Equal(t, []string{string(event.TypeError), string(event.TypeDone)}, types)
			require.Contains(t, last.Data, `"finished_reason":"error"`)
			require.True(t, strings.Contains(logs.String(), "connection reset") && strings.Contains(logs.String(), `"plan_id":"p1"`),
				"the failure is logged: %s", logs.String())
		})
	}
}
