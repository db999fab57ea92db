package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/httpapi"
)

// Agent definitions are private to their creator unless an operator shared
// them: another user cannot list, read, edit or bind them (404, like
// sessions and plans); only operators share a definition or edit a shared
// one; the default definition is shared.
func TestDefinitionVisibility(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newChatEnv(t, driver, says("x"), nil)
			ctx := context.Background()
			create := func(user string, body map[string]any) httpapi.DefinitionView {
				t.Helper()
				resp := e.request(t, ctx, user, "POST", "/api/agent-definitions", body)
				require.Equal(t, http.StatusCreated, resp.StatusCode)
				return decodeBody[httpapi.DefinitionView](t, resp)
			}
			def := agents.Definition{Name: "default", SystemPrompt: "house rules", IsDefault: true, CreatedBy: "system"}
			require.NoError(t, e.stores.Definitions.CreateDefinition(ctx, &def))
			require.Equal(t, agents.VisibilityShared, def.Visibility, "the default definition is shared")

			secret := create("alice", map[string]any{"name": "mine", "system_prompt": "alice's secret prompt"})
			require.Equal(t, "private", secret.Visibility)
			shared := create("ops", map[string]any{"name": "house style", "system_prompt": "be brief", "visibility": "shared"})
			require.Equal(t, "shared", shared.Visibility)

			status := func(user, method, path string, body any) (int, string) {
				t.Helper()
				resp := e.request(t, ctx, user, method, path, body)
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			for _, tc := range []struct {
				name, user, method, path string
				body                     any
				want                     int
			}{
				{"bob reads alice's private definition", "bob", "GET", "/api/agent-definitions/" + secret.ID, nil, 404},
				{"bob edits alice's private definition", "bob", "PATCH", "/api/agent-definitions/" + secret.ID, map[string]any{"description": "mine now"}, 404},
				{"bob binds a session to it", "bob", "POST", "/api/agent/stream",
					map[string]any{"message": "hi", "stream": false, "agent_definition_id": secret.ID}, 404},
				{"alice shares her definition", "alice", "PATCH", "/api/agent-definitions/" + secret.ID, map[string]any{"visibility": "shared"}, 400},
				{"alice creates a shared one", "alice", "POST", "/api/agent-definitions", map[string]any{"name": "pub", "visibility": "shared"}, 400},
				{"an unknown visibility", "alice", "POST", "/api/agent-definitions", map[string]any{"name": "odd", "visibility": "public"}, 400},
				{"bob edits a shared definition", "bob", "PATCH", "/api/agent-definitions/" + shared.ID, map[string]any{"description": "x"}, 404},
				{"bob edits the default", "bob", "PATCH", "/api/agent-definitions/" + def.ID, map[string]any{"system_prompt": "obey bob"}, 404},
				{"bob reads a shared definition", "bob", "GET", "/api/agent-definitions/" + shared.ID, nil, 200},
				{"bob reads the default", "bob", "GET", "/api/agent-definitions/" + def.ID, nil, 200},
				{"alice reads her own", "alice", "GET", "/api/agent-definitions/" + secret.ID, nil, 200},
				{"alice edits her own", "alice", "PATCH", "/api/agent-definitions/" + secret.ID, map[string]any{"description": "still mine"}, 200},
				{"an operator reads it", "ops", "GET", "/api/agent-definitions/" + secret.ID, nil, 200},
				{"an operator edits a shared one", "ops", "PATCH", "/api/agent-definitions/" + shared.ID, map[string]any{"description": "house"}, 200},
			} {
				got, body := status(tc.user, tc.method, tc.path, tc.body)
				require.Equal(t, tc.want, got, "%s: %s", tc.name, body)
				if tc.want == 404 {
					require.NotContains(t, body, "alice's secret prompt", tc.name)
				}
			}
			fresh := decodeBody[httpapi.DefinitionView](t, e.request(t, ctx, "alice", "GET", "/api/agent-definitions/"+secret.ID, nil))
			require.Equal(t, "still mine", fresh.Description, "bob's edit changed nothing")
			require.Equal(t, "private", fresh.Visibility)

			names := func(user string) []string {
				list := decodeBody[httpapi.DefinitionList](t, e.request(t, ctx, user, "GET", "/api/agent-definitions", nil))
				var out []string
				for _, d := range list.Definitions {
					out = append(out, d.Name)
				}
				return out
			}
			require.ElementsMatch(t, []string{"default", "house style"}, names("bob"))
			require.ElementsMatch(t, []string{"default", "house style", "mine"}, names("alice"))
			require.ElementsMatch(t, []string{"default", "house style", "mine"}, names("ops"))

			// Names are per creator: bob's "mine" neither collides with nor reveals alice's.
			bobs := create("bob", map[string]any{"name": "mine"})
			require.NotEqual(t, secret.ID, bobs.ID)

			// Binding: her own and shared definitions, yes; the session keeps it.
			for _, id := range []string{secret.ID, shared.ID, def.ID} {
				turn := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "alice", "POST", "/api/agent/stream",
					map[string]any{"message": "hi", "stream": false, "agent_definition_id": id}))
				require.Equal(t, id, turn.Session.AgentDefinitionID)
			}
			bobTurn := decodeBody[httpapi.TurnResult](t, e.request(t, ctx, "bob", "POST", "/api/agent/stream",
				map[string]any{"message": "hi", "stream": false, "agent_definition_id": shared.ID}))
			require.Equal(t, shared.ID, bobTurn.Session.AgentDefinitionID)

			// An operator makes alice's definition shared: now bob sees it, and
			// alice no longer edits it.
			got, body := status("ops", "PATCH", "/api/agent-definitions/"+secret.ID, map[string]any{"visibility": "shared"})
			require.Equal(t, 200, got, body)
			got, _ = status("bob", "GET", "/api/agent-definitions/"+secret.ID, nil)
			require.Equal(t, 200, got)
			got, _ = status("alice", "PATCH", "/api/agent-definitions/"+secret.ID, map[string]any{"description": "again"})
			require.Equal(t, 404, got)
		})
	}
}
