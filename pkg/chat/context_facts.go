package chat

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/textcut"
	"github.com/planwright/planwright/tools/builtin"
)

// Kinds of Fact.
const (
	FactEntity = "entity"
	FactPlan   = "plan"
)

// maxFacts bounds the facts a session keeps; the oldest go first.
const maxFacts = 60

// Fact is something a turn did that later turns need to refer to: a
// workspace entity created, changed or deleted, or a plan made — with its
// id. Facts survive in session metadata when the turn that made them is
// long summarised away.
type Fact struct {
	// Kind is entity or plan.
	Kind string `json:"kind"`
	// Action is created, updated or deleted (entities), or made (plans).
	Action string `json:"action,omitempty"`
	// Type is the entity's type (task, project, …).
	Type string `json:"type,omitempty"`
	ID   string `json:"id"`
	// Name is the entity's title or the plan's goal.
	Name string `json:"name,omitempty"`
	// Status is a plan's status when the turn ended (the context shows its
	// current one).
	Status string `json:"status,omitempty"`
}

func (f Fact) line() string {
	name, _ := textcut.CutReport(oneLine(f.Name), 100)
	if f.Kind == FactPlan {
		s := fmt.Sprintf("- plan %s (id %s)", quoteOr(name, "unnamed"), f.ID)
		if f.Status != "" {
			s += ": status " + f.Status
		}
		return s
	}
	return fmt.Sprintf("- %s %s (id %s): %s", f.Type, quoteOr(name, "unnamed"), f.ID, f.Action)
}

// MergeFacts adds a turn's facts to a session's: one fact per id (the
// newest, but an entity created and then changed stays "created"), newest
// last, at most 60.
func MergeFacts(old, added []Fact) []Fact {
	out := append([]Fact(nil), old...)
	for _, f := range added {
		if i := slices.IndexFunc(out, func(o Fact) bool { return o.ID == f.ID }); i >= 0 {
			prev := out[i]
			if prev.Action == "created" && f.Action == "updated" {
				f.Action = "created"
			}
			if f.Name == "" {
				f.Name = prev.Name
			}
			if f.Type == "" {
				f.Type = prev.Type
			}
			out = slices.Delete(out, i, i+1)
		}
		out = append(out, f)
	}
	if len(out) > maxFacts {
		out = out[len(out)-maxFacts:]
	}
	return out
}

// factCollector observes a turn's events — its own and its plans'
// executors' — for the facts later turns need.
type factCollector struct {
	mu    sync.Mutex
	facts []Fact
}

// tee returns a sink that observes every event before passing it on.
func (c *factCollector) tee(next event.Sink) event.Sink {
	return event.SinkFunc(func(ctx context.Context, e event.Envelope) {
		c.observe(e.Event)
		if next != nil {
			next.Emit(ctx, e)
		}
	})
}

var pastTense = map[string]string{"create": "created", "update": "updated", "delete": "deleted"}

func (c *factCollector) observe(ev event.Event) {
	var f Fact
	switch e := ev.(type) {
	case event.Operation:
		action, ok := pastTense[e.Action]
		if !ok || e.EntityID == "" || !slices.Contains(builtin.Types, e.EntityType) {
			return
		}
		f = Fact{Kind: FactEntity, Action: action, Type: e.EntityType, ID: e.EntityID, Name: e.EntityName}
	case event.PlanCreated:
		f = Fact{Kind: FactPlan, Action: "made", ID: e.Plan.ID, Name: e.Plan.Goal, Status: string(e.Plan.Status)}
	case event.PlanRevised:
		f = Fact{Kind: FactPlan, Action: "made", ID: e.Plan.ID, Name: e.Plan.Goal, Status: string(e.Plan.Status)}
	case event.PlanReadyForReview:
		f = Fact{Kind: FactPlan, Action: "made", ID: e.Plan.ID, Name: e.Plan.Goal, Status: string(e.Plan.Status)}
	case event.PlanComplete:
		f = Fact{Kind: FactPlan, Action: "made", ID: e.PlanID, Status: string(e.Status)}
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.facts = MergeFacts(c.facts, []Fact{f})
}

// all returns the facts observed so far.
func (c *factCollector) all() []Fact {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Fact(nil), c.facts...)
}
