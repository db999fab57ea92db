package httpapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
)

func TestNewAPIReportsEveryBadField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  httpapi.APIConfig
		want []string
	}{
		{"everything wrong", httpapi.APIConfig{Auth: httpapi.AuthConfig{Mode: httpapi.AuthAPIKey}, OnDisconnect: "later",
			Poll: -time.Second, MaxWatchStreamsPerUser: -1, Feed: event.NewFeed()},
			[]string{"Chat", "Sessions", "OnDisconnect", "Poll", "MaxWatchStreamsPerUser", "Runs", "Queue", "Auth.Keys"}},
		{"unknown auth mode", httpapi.APIConfig{Auth: httpapi.AuthConfig{Mode: "basic"}}, []string{"Chat", "Sessions", "Runs", "Feed", "Queue", "Auth.Mode"}},
		{"plan control without plans to read", httpapi.APIConfig{Auth: httpapi.AuthConfig{Mode: httpapi.AuthNone}, Plans: planControlStub{}},
			[]string{"Chat", "Sessions", "Runs", "Feed", "Queue", "PlanStore"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := httpapi.NewAPI(tc.cfg)
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			var fields []string
			for _, f := range apperr.FieldsOf(err) {
				fields = append(fields, f.Field)
			}
			require.ElementsMatch(t, tc.want, fields)
		})
	}
}

// planControlStub is a PlanControl that is only configured, never called.
type planControlStub struct{ httpapi.PlanControl }
