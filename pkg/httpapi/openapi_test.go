package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
)

func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	served := slices.Sorted(slices.Values(env.routes))
	documented := slices.Sorted(slices.Values(httpapi.OpenAPIPaths()))
	for _, r := range served {
		require.Contains(t, documented, r, "echo serves a route the OpenAPI document lacks")
	}
	for _, r := range documented {
		require.Contains(t, served, r, "the OpenAPI document names a route echo does not serve")
	}

	resp := env.request(t, context.Background(), "", "GET", "/openapi.yaml", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	var doc struct {
		OpenAPI    string                    `yaml:"openapi"`
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Paths["/api/agent/stream"], "post")
	for _, typ := range event.Types() {
		require.Contains(t, doc.Components.Schemas, "Event_"+string(typ))
	}
	require.Contains(t, doc.Components.Schemas, "StreamRequest")
}
