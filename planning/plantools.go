package planning

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools"
)

// Tools makes the planner's plan tools for one turn. They are thin
// adapters: each decodes its call, asks Submit or Control, and turns the
// answer into content for the model and effects for the turn — Touched for
// the plan it touched, agents.AwaitUser when the turn ends waiting on the
// user. It is safe for concurrent use.
type Tools struct {
	*base
	submit  func(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Submission, error)
	control *Control
}

// CreatePlanArgs are create_plan's arguments.
type CreatePlanArgs struct {
	Goal   string        `json:"goal"`
	Mode   planmode.Mode `json:"mode,omitempty"`
	PlanID string        `json:"plan_id,omitempty"`
	Steps  []StepArgs    `json:"steps"`
}

// StepArgs is a step as the planner (create_plan) or a person (the approve
// route) writes it: a step definition in which every field may be left
// out, and "id" is accepted for "number". StepsFrom is its one conversion.
type StepArgs struct {
	event.StepDefinition
	ID int `json:"id,omitempty"`
}

func (a CreatePlanArgs) steps() []Step { return StepsFrom(a.Steps) }

// StepsFrom turns steps as the planner (or a human editing a plan) writes
// them into pending plan steps: a step without a number takes its "id", a
// step without a title the start of its description.
func StepsFrom(in []StepArgs) []Step {
	out := make([]Step, 0, len(in))
	for _, s := range in {
		d := s.StepDefinition
		if d.Number == 0 {
			d.Number = s.ID
		}
		d.Title = strings.TrimSpace(d.Title)
		if d.Title == "" {
			d.Title = textcut.Cut(strings.TrimSpace(d.Description), 60)
		}
		out = append(out, Step{StepDefinition: d, Status: StepPending})
	}
	return out
}

// createPlanSchema is create_plan's JSON Schema, written out so "args" can
// be any object.
var createPlanSchema = json.RawMessage(`{
  "type": "object",
  "required": ["goal", "steps"],
  "properties": {
    "goal": {"type": "string", "description": "what the plan achieves"},
    "mode": {"type": "string", "enum": ["auto_execute", "draft_only", "agent_review"],
      "description": "auto_execute runs it now; draft_only waits for the user's approval; agent_review has a reviewer agent check it first"},
    "plan_id": {"type": "string", "description": "only to revise a plan the reviewer asked changes for"},
    "steps": {"type": "array", "minItems": 1, "items": {
      "type": "object",
      "properties": {
        "number": {"type": "integer", "minimum": 1},
        "id": {"type": "integer", "minimum": 1, "description": "alias of number"},
        "title": {"type": "string"},
        "description": {"type": "string", "description": "the task, complete enough for an executor that sees nothing else"},
        "tools": {"type": "array", "items": {"type": "string"}, "description": "the tools the step's executor may use"},
        "executor_required": {"type": "boolean", "description": "true: a focused executor agent does the step"},
        "depends_on": {"type": "array", "items": {"type": "integer"}, "description": "steps that must complete first"},
        "tool": {"type": "string", "description": "a tool to call directly instead of an executor"},
        "args": {"type": "object", "description": "the direct tool's arguments; \"{{steps.N.result}}\" is replaced by step N's result"}
      }
    }}
  }
}`)

// CreatePlanTool is the planner's create_plan tool for one turn. Within
// the turn, a create_plan call that follows the reviewer's request for
// changes revises that plan even without plan_id (a model cannot always
// repeat an id it was told).
func (t *Tools) CreatePlanTool(origin Origin) tools.Tool {
	var mu sync.Mutex
	underReview := ""
	return tools.New(tools.Spec{
		Name: "create_plan",
		Description: "Turn work that needs several steps into a plan of numbered steps joined by dependencies; " +
			"independent steps run in parallel. Returns the outcome (or that the plan waits for review).",
		Schema:  createPlanSchema,
		Timeout: tools.NoTimeout,
	}, func(ctx context.Context, call tools.Call, a CreatePlanArgs) (tools.Result, error) {
		if _, err := planmode.Parse(string(a.Mode)); err != nil {
			return tools.Result{}, apperr.New(apperr.Invalid, "%s", err.Error())
		}
		og := origin
		if og.UserID == "" {
			og.UserID = call.Scope.UserID
		}
		if og.SessionID == "" {
			og.SessionID = call.Scope.SessionID
		}
		if og.ContextType == "" {
			og.ContextType, og.EntityID = call.Scope.ContextType, call.Scope.EntityID
		}
		if og.PlannerAgentID == "" {
			og.PlannerAgentID = call.Events.Source().AgentID
		}
		og.CallID = call.ID
		mu.Lock()
		if a.PlanID == "" {
			a.PlanID = underReview
		}
		mu.Unlock()
		sub, err := t.submit(ctx, og, Draft{Goal: a.Goal, Mode: a.Mode, PlanID: a.PlanID, Steps: a.steps()}, call.Events)
		if err != nil {
			return tools.Result{}, err
		}
		// Submission.Plan is the plan as it stands when Submit returns:
		// no need to read it again.
		mu.Lock()
		underReview = ""
		if sub.Plan.Status == StatusInReview {
			underReview = sub.Plan.ID
		}
		mu.Unlock()
		return submitted(sub), nil
	})
}

// ApprovePlanArgs are approve_plan's arguments.
type ApprovePlanArgs struct {
	PlanID string `json:"plan_id,omitempty" jsonschema:"the plan to approve; default: this session's most recent plan waiting for review"`
}

// ApprovePlanTool lets the planner run the session's plan waiting for
// review when the user says so in chat ("yes, go ahead") — in a later turn
// than the one that created the plan: only a human approves a plan that
// waits for review, and the user has not seen a plan created in this very
// turn. Within that turn the call fails with a tool error that says why and
// leaves the turn waiting on the user. The approval is recorded as the
// turn's user's.
func (t *Tools) ApprovePlanTool(origin Origin) tools.Tool {
	return tools.New(tools.Spec{
		Name: "approve_plan",
		Description: "Run a plan of this session that waits for the user's review, when the user has clearly approved it in their message. " +
			"A plan created in this same turn cannot be approved: the user must review it first.",
		Timeout: tools.NoTimeout,
	}, func(ctx context.Context, call tools.Call, a ApprovePlanArgs) (tools.Result, error) {
		id := a.PlanID
		if id == "" {
			plans, _, err := t.cfg.Store.ListPlans(ctx, ListQuery{UserID: call.Scope.UserID, SessionID: call.Scope.SessionID,
				Status: []Status{StatusPendingReview, StatusInReview}, Limit: 1})
			if err != nil {
				return tools.Result{}, err
			}
			if len(plans) == 0 && origin.StreamRunID != "" {
				// A turn taken over: the plan this turn approved already.
				plans, _, err = t.cfg.Store.ListPlans(ctx, ListQuery{UserID: call.Scope.UserID, SessionID: call.Scope.SessionID,
					Status: []Status{StatusExecuting}, Limit: 20})
				if err != nil {
					return tools.Result{}, err
				}
				plans = slices.DeleteFunc(plans, func(p Plan) bool {
					return p.Approval == nil || p.Approval.Note != approvalNote(origin)
				})
			}
			if len(plans) == 0 {
				return tools.Result{}, apperr.New(apperr.NotFound, "this session has no plan waiting for review")
			}
			id = plans[0].ID
		}
		p, err := t.cfg.Store.GetPlan(ctx, id)
		if err != nil || p.UserID != call.Scope.UserID || p.SessionID != call.Scope.SessionID {
			return tools.Result{}, apperr.New(apperr.NotFound, "plan %s is not a plan of this session", id)
		}
		if origin.StreamRunID != "" && p.StreamRunID == origin.StreamRunID {
			// The planner must never approve its own plan: the user has not
			// seen it yet. The turn ends waiting on them.
			return tools.Result{Effects: []tools.Effect{agents.AwaitUser{}}}, apperr.New(apperr.Conflict,
				"plan %s was created in this turn and waits for the user's review: only the user can approve it, "+
					"with the approve button or by asking for it in their next message. Do not try again; tell the user the plan waits for their approval.", p.ID)
		}
		note := approvalNote(origin)
		var ended Plan
		if p.Status == StatusExecuting && origin.StreamRunID != "" && p.Approval != nil && p.Approval.Note == note &&
			!t.control.Running(p.ID) {
			// This turn approved the plan before its process died: the turn
			// taken over runs it on (its call runs again) instead of
			// approving it twice.
			ended, err = t.control.Run(ctx, p, call.Events)
		} else {
			by := Actor{UserID: call.Scope.UserID, Operator: origin.Operator}
			ended, err = t.control.Approve(ctx, id, by, nil, note, call.Events)
		}
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{Content: Summary(ended, t.cfg.SummaryChars), Effects: []tools.Effect{Touched{id}}}, nil
	})
}

// approvalNote is the note of an approval in chat: it names the turn's run,
// so the turn, taken over, knows the plan it approved already.
func approvalNote(origin Origin) string {
	if origin.StreamRunID == "" {
		return "approved in chat"
	}
	return "approved in chat (run " + origin.StreamRunID + ")"
}

// submitted is create_plan's answer: the outcome for the planner, the plan
// it touched, and, when the plan waits for a human, the turn waiting on the
// user.
func submitted(sub Submission) tools.Result {
	effects := []tools.Effect{Touched{sub.Plan.ID}}
	if sub.AwaitsUser() {
		effects = append(effects, agents.AwaitUser{})
	}
	return tools.Result{Content: sub.Outcome, Effects: effects}
}
