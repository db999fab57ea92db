package chat_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/planning"
)

// planRunner is a chat.PlanRunner and a chat.Synthesizer whose behaviour is
// function fields.
type planRunner struct {
	RunFunc        func(ctx context.Context, p planning.Plan) (planning.Plan, error)
	SynthesizeFunc func(ctx context.Context, p planning.Plan) (string, event.Usage, error)
}

func (f planRunner) Run(ctx context.Context, p planning.Plan, _ event.Emitter) (planning.Plan, error) {
	return f.RunFunc(ctx, p)
}

func (f planRunner) ClaimApproval(context.Context, string, planning.HumanApproval, event.Emitter) (planning.Plan, error) {
	return planning.Plan{}, apperr.New(apperr.Conflict, "this fake approves nothing")
}

func (f planRunner) PlansOfRun(context.Context, string, string) ([]planning.Plan, error) {
	return nil, nil
}

func (f planRunner) Synthesize(ctx context.Context, p planning.Plan, _ event.Emitter) (string, event.Usage, error) {
	return f.SynthesizeFunc(ctx, p)
}

func completes(p planning.Plan) (planning.Plan, error) {
	p.Status = planning.StatusCompleted
	p.Usage = event.Usage{InputTokens: 100, OutputTokens: 20}
	return p, nil
}

// A plan approved after its turn ended continues the conversation: its
// answer is appended to the plan's session, with the synthesizer's tokens;
// the outcome counts the plan's and the synthesizer's.
func TestContinuePlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, store := newService(t, answers)
	// continuing is a service over the same store that continues plans
	// with plans.
	continuing := func(plans planRunner) *chat.Service {
		svc, err := chat.NewService(chat.Config{Store: store, Runner: answers, Plans: plans, Synthesizer: plans,
			Planner: func(context.Context, chat.TurnInfo) (chat.Planner, error) { return chat.Planner{}, nil }})
		require.NoError(t, err)
		return svc
	}
	sess := chat.Session{UserID: "alice", Title: "launch", ContextType: chat.ContextGlobal}
	require.NoError(t, store.CreateSession(ctx, &sess))
	p := planning.Plan{ID: "plan-1", SessionID: sess.ID, UserID: "alice", Goal: "launch", Status: planning.StatusExecuting,
		Steps: []planning.Step{{StepDefinition: event.StepDefinition{Number: 1, Title: "Draft"}, Status: planning.StepCompleted, Result: "drafted"}}}

	t.Run("the answer joins the session", func(t *testing.T) {
		out, err := continuing(planRunner{
			RunFunc: func(_ context.Context, p planning.Plan) (planning.Plan, error) { return completes(p) },
			SynthesizeFunc: func(_ context.Context, p planning.Plan) (string, event.Usage, error) {
				require.Equal(t, planning.StatusCompleted, p.Status, "the synthesizer sees the plan as it ended")
				return "All done.", event.Usage{InputTokens: 7, OutputTokens: 3}, nil
			},
		}).ContinuePlan(ctx, "", p, event.Emitter{})
		require.NoError(t, err)
		require.Equal(t, "All done.", out.Answer)
		require.Equal(t, 107, out.Usage.InputTokens)
		require.Equal(t, 23, out.Usage.OutputTokens)
		require.NotEmpty(t, out.MessageID)
		msgs, err := store.ListMessages(ctx, sess.ID, 10)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, chat.RoleAssistant, msgs[0].Role)
		require.Equal(t, "All done.", msgs[0].Content)
		require.Equal(t, "plan-1", msgs[0].PlanID)
		require.Equal(t, 7, msgs[0].Usage.InputTokens, "the message carries the synthesizer's tokens")
	})

	t.Run("a failed synthesis answers with the summary", func(t *testing.T) {
		out, err := continuing(planRunner{
			RunFunc: func(_ context.Context, p planning.Plan) (planning.Plan, error) { return completes(p) },
			SynthesizeFunc: func(context.Context, planning.Plan) (string, event.Usage, error) {
				return "", event.Usage{}, errors.New("provider down")
			},
		}).ContinuePlan(ctx, "", p, event.Emitter{})
		require.NoError(t, err)
		require.Contains(t, out.Answer, "drafted")
	})

	t.Run("a plan that cannot run is an error and stores nothing", func(t *testing.T) {
		before, err := store.ListMessages(ctx, sess.ID, 10)
		require.NoError(t, err)
		_, err = continuing(planRunner{
			RunFunc: func(context.Context, planning.Plan) (planning.Plan, error) {
				return planning.Plan{}, errors.New("claimed elsewhere")
			},
		}).ContinuePlan(ctx, "", p, event.Emitter{})
		require.Error(t, err)
		after, err := store.ListMessages(ctx, sess.ID, 10)
		require.NoError(t, err)
		require.Len(t, after, len(before))
	})

	t.Run("a service without a plan runner cannot continue plans", func(t *testing.T) {
		svc, _ := newService(t, answers)
		_, err := svc.ContinuePlan(ctx, "", p, event.Emitter{})
		require.Equal(t, apperr.Internal, apperr.CodeOf(err))
	})

	t.Run("a plan without a session stores nothing", func(t *testing.T) {
		out, err := continuing(planRunner{
			RunFunc: func(_ context.Context, p planning.Plan) (planning.Plan, error) { return completes(p) },
			SynthesizeFunc: func(context.Context, planning.Plan) (string, event.Usage, error) {
				return "ok", event.Usage{}, nil
			},
		}).ContinuePlan(ctx, "", planning.Plan{ID: "plan-2", UserID: "alice"}, event.Emitter{})
		require.NoError(t, err)
		require.Empty(t, out.MessageID)
	})
}
