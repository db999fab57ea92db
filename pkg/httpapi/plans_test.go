package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/persistence"
	"github.com/planwright/planwright/persistence/dbtest"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/httpapi"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
)

func seedPlan(t *testing.T, s planning.Store, user string, status planning.Status) planning.Plan {
	t.Helper()
	p := planning.Plan{UserID: user, SessionID: "s-" + user, Goal: "launch " + user, Mode: planmode.DraftOnly, Status: status,
		Steps: []planning.Step{
			{StepDefinition: event.StepDefinition{Number: 1, Title: "draft", ExecutorRequired: true}},
			{StepDefinition: event.StepDefinition{Number: 2, Title: "publish", ExecutorRequired: true, DependsOn: []int{1}}},
		}}
	require.NoError(t, s.CreatePlan(context.Background(), &p))
	return p
}

func TestPlanInspection(t *testing.T) {
	t.Parallel()
	for _, driver := range dbtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := newChatEnv(t, driver, says("x"), nil)
			ctx := context.Background()
			s := env.stores.PlanRecords
			mine := seedPlan(t, s, "alice", planning.StatusPendingReview)
			seedPlan(t, s, "alice", planning.StatusCompleted)
			theirs := seedPlan(t, s, "bob", planning.StatusCompleted)

			_, err := s.RevisePlan(ctx, mine.ID, planning.Revision{Author: "user", Reason: "split", Steps: []planning.Step{
				{StepDefinition: event.StepDefinition{Number: 1, Title: "draft v2", ExecutorRequired: true}},
				{StepDefinition: event.StepDefinition{Number: 3, Title: "announce", ExecutorRequired: true, DependsOn: []int{1}}},
			}})
			require.NoError(t, err)
			require.NoError(t, s.AddReview(ctx, planning.Review{PlanID: mine.ID, Round: 1, Version: 1, Verdict: planning.VerdictChangesRequested, Comments: "split it"}))
			agentID, sessID, execID := persistence.NewID(), persistence.NewID(), persistence.NewID()
			require.NoError(t, s.CreateAgent(ctx, planning.AgentRecord{ID: agentID, Role: event.RoleExecutor, UserID: "alice", PlanID: mine.ID, StepNumber: 1}))
			require.NoError(t, s.CreateAgentSession(ctx, planning.AgentSession{ID: sessID, AgentID: agentID, PlanID: mine.ID, StepNumber: 1, UserID: "alice"}))
			require.NoError(t, s.CreateExecution(ctx, planning.Execution{ID: execID, PlanID: mine.ID, StepNumber: 1, AgentID: agentID, AgentSessionID: sessID, UserID: "alice", Task: "draft"}))
			require.NoError(t, s.AppendAgentMessage(ctx, planning.AgentMessage{AgentSessionID: sessID, ExecutionID: execID, Seq: 1, Role: "user", Content: "draft"}))
			require.NoError(t, s.AppendAgentMessage(ctx, planning.AgentMessage{AgentSessionID: sessID, ExecutionID: execID, Seq: 2, Role: "assistant",
				ToolCalls: []planning.ToolCall{{ID: "c1", Name: "create_document", Arguments: json.RawMessage(`{"title":"x"}`), Signature: "cHJvdmlkZXItc2ln"}}}))
			require.NoError(t, s.RecordToolExecution(ctx, tools.Execution{UserID: "alice", ToolName: "create_document", Arguments: json.RawMessage(`{"title":"x"}`),
				Success: true, Source: event.Source{Role: event.RoleExecutor, PlanID: mine.ID, StepNumber: 1, ExecutionID: execID}}))

			list := decodeBody[httpapi.PlanList](t, env.request(t, ctx, "alice", "GET", "/api/plans", nil))
			require.Len(t, list.Plans, 2, "a user sees only their plans")
			all := decodeBody[httpapi.PlanList](t, env.request(t, ctx, "ops", "GET", "/api/plans", nil))
			require.Len(t, all.Plans, 3, "operators see every plan")
			bobs := decodeBody[httpapi.PlanList](t, env.request(t, ctx, "ops", "GET", "/api/plans?user_id=bob", nil))
			require.Len(t, bobs.Plans, 1)
			pending := decodeBody[httpapi.PlanList](t, env.request(t, ctx, "alice", "GET", "/api/plans?status=pending_review&mode=draft_only", nil))
			require.Len(t, pending.Plans, 1)
			require.Equal(t, mine.ID, pending.Plans[0].ID)
			page := decodeBody[httpapi.PlanList](t, env.request(t, ctx, "ops", "GET", "/api/plans?limit=2", nil))
			require.Len(t, page.Plans, 2)
			rest := decodeBody[httpapi.PlanList](t, env.request(t, ctx, "ops", "GET", "/api/plans?limit=2&cursor="+page.NextCursor, nil))
			require.Len(t, rest.Plans, 1)
			require.Empty(t, rest.NextCursor)

			for _, bad := range []string{"?status=done", "?mode=x", "?since=yesterday", "?limit=0", "?cursor=zzz", "?user_id=bob"} {
				resp := env.request(t, ctx, "alice", "GET", "/api/plans"+bad, nil)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
				resp.Body.Close()
			}

			detail := decodeBody[httpapi.PlanDetail](t, env.request(t, ctx, "alice", "GET", "/api/plans/"+mine.ID, nil))
			require.Equal(t, 2, detail.Plan.Version)
			require.Len(t, detail.Revisions, 2)
			require.Equal(t, &httpapi.StepDiff{Added: []int{3}, Removed: []int{2}, Changed: []int{1}}, detail.Revisions[1].Diff)
			require.Len(t, detail.Reviews, 1)
			require.Len(t, detail.Executions, 1)

			resp := env.request(t, ctx, "alice", "GET", "/api/plans/"+theirs.ID, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, "another user's plan does not exist")
			resp.Body.Close()
			opsView := decodeBody[httpapi.PlanDetail](t, env.request(t, ctx, "ops", "GET", "/api/plans/"+theirs.ID, nil))
			require.Equal(t, theirs.ID, opsView.Plan.ID)

			raw := env.request(t, ctx, "alice", "GET", "/api/executions/"+execID, nil)
			body, err := io.ReadAll(raw.Body)
			raw.Body.Close()
			require.NoError(t, err)
			require.NotContains(t, string(body), "cHJvdmlkZXItc2ln", "a provider's signature is never shown")
			var exec httpapi.ExecutionDetail
			require.NoError(t, json.Unmarshal(body, &exec))
			require.Len(t, exec.Transcript, 2)
			require.Equal(t, []httpapi.TranscriptToolCall{{ID: "c1", Name: "create_document", Arguments: json.RawMessage(`{"title":"x"}`)}},
				exec.Transcript[1].ToolCalls)
			require.Len(t, exec.ToolCalls, 1)
			require.Equal(t, "create_document", exec.ToolCalls[0].Tool)
			resp = env.request(t, ctx, "bob", "GET", "/api/executions/"+execID, nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			resp.Body.Close()
			resp = env.request(t, ctx, "alice", "GET", "/api/executions/nope", nil)
			require.Equal(t, http.StatusNotFound, resp.StatusCode)
			resp.Body.Close()
		})
	}
}
