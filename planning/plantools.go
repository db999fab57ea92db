package planning

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/planmode"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools"
)

// Tools makes the planner's plan tools for one turn: create_plan and
// request_plan_approval. They are thin adapters: each decodes its call,
// asks Submit or the store, and turns the answer into content for the
// model and effects for the turn — Touched for the plan it touched,
// agents.AwaitUser when the turn ends waiting on the user. None approves a
// plan. It is safe for concurrent use.
type Tools struct {
	*base
	submit func(ctx context.Context, origin Origin, d Draft, em event.Emitter) (Submission, error)
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

// stepItemSchema is a step as create_plan and revise_plan take it.
const stepItemSchema = `{
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
    }`

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
    "steps": {"type": "array", "minItems": 1, "items": ` + stepItemSchema + `}
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
		// A call made again (a takeover) finds the plan it made (Submit
		// looks it up by run and call) instead of making another.
		Effect: tools.Idempotent,
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

// RequestApprovalToolName is the planner's tool for asking the user to
// approve a plan. There is no tool that approves one: whatever a model
// reads (a workspace document, a fetched page, a tool's result) must not
// be able to run a plan that waits for a person.
const RequestApprovalToolName = "request_plan_approval"

// RequestApprovalArgs are request_plan_approval's arguments.
type RequestApprovalArgs struct {
	PlanID string `json:"plan_id,omitempty" jsonschema:"the plan; default: this session's most recent plan waiting for review"`
}

// RequestApprovalTool lets the planner ask the user to approve a plan of
// the session that waits for review: it emits plan_approval_requested with
// the plan's current version and summary (what a client shows next to its
// Approve button) and ends the turn waiting on the user. It never changes
// the plan: the user approves with the approve route, or a chat request
// whose approve field names the plan and the version they saw.
func (t *Tools) RequestApprovalTool() tools.Tool {
	return tools.New(tools.Spec{
		Name: RequestApprovalToolName,
		Description: "Ask the user to approve a plan of this session that waits for their review. " +
			"It does not approve or run the plan: the user does, with the Approve button. The turn ends waiting for them.",
		Timeout: tools.NoTimeout,
		Effect:  tools.Idempotent, // asking twice asks once more, changes nothing
	}, func(ctx context.Context, call tools.Call, a RequestApprovalArgs) (tools.Result, error) {
		p, err := t.waitingPlan(ctx, call.Scope, a.PlanID)
		if err != nil {
			return tools.Result{}, err
		}
		summary := fmt.Sprintf("Plan %q (version %d, %d steps) waits for your approval: approve it to run it, or reject it.",
			p.Goal, p.Version, len(p.Steps))
		t.planEmitter(call.Events, p.ID, "").Emit(ctx, event.PlanApprovalRequested{PlanID: p.ID, Version: p.Version, Summary: summary})
		return tools.Result{Content: summary, Effects: []tools.Effect{Touched{p.ID}, agents.Halt{}, agents.AwaitUser{}}}, nil
	})
}

// waitingPlan is the plan of scope's session that waits for review: id,
// or the session's most recent one.
func (t *Tools) waitingPlan(ctx context.Context, scope tools.Scope, id string) (Plan, error) {
	if id == "" {
		plans, _, err := t.cfg.Store.ListPlans(ctx, ListQuery{UserID: scope.UserID, SessionID: scope.SessionID,
			Status: []Status{StatusPendingReview}, Limit: 1})
		if err != nil {
			return Plan{}, err
		}
		if len(plans) == 0 {
			return Plan{}, apperr.New(apperr.NotFound, "this session has no plan waiting for review")
		}
		id = plans[0].ID
	}
	p, err := t.cfg.Store.GetPlan(ctx, id)
	if err != nil || p.UserID != scope.UserID || p.SessionID != scope.SessionID {
		return Plan{}, apperr.New(apperr.NotFound, "plan %s is not a plan of this session", id)
	}
	if p.Status != StatusPendingReview {
		return Plan{}, apperr.New(apperr.Conflict, "plan %s is %s; only a plan waiting for review can be put to the user", p.ID, p.Status)
	}
	return p, nil
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
