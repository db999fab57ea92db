package planning

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// errStore is a write the fake store refuses.
var errStore = errors.New("database refused the write")

// ledger records, in order, the writes a fake store takes and the events a
// recording emitter sees, so a test can tell which came first.
type ledger struct {
	mu      sync.Mutex
	entries []string
	// cancelled records, per write, whether its context was already done.
	cancelled map[string]bool
}

func (l *ledger) add(entry string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entry)
}

func (l *ledger) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.entries...)
}

// emitter records every event it is given in the ledger as "event <type>".
func (l *ledger) emitter() event.Emitter {
	return event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		l.add("event " + string(e.Event.Type()))
	}), event.Source{Role: event.RoleSystem}, time.Now)
}

// logEmitter is an emitter WithCommits whose sink acts as the run log:
// it takes an event's commit ("take <type>"), runs its write on a context
// of its own (the log's transaction), and records the event only when the
// write succeeded.
func (l *ledger) logEmitter() event.Emitter {
	return event.NewEmitter(event.SinkFunc(func(_ context.Context, e event.Envelope) {
		if write := e.Commit.Take(); write != nil {
			l.add("take " + string(e.Event.Type()))
			if err := write(context.Background()); err != nil {
				e.Commit.Resolve(err)
				return
			}
			defer e.Commit.Resolve(nil)
		}
		l.add("event " + string(e.Event.Type()))
	}), event.Source{Role: event.RoleSystem}, time.Now).WithCommits()
}

// fakeStore is a Store whose writes the ledger records ("write <method>");
// a method named in fail refuses. Methods a test does not need panic (the
// embedded nil interface).
type fakeStore struct {
	Store
	log  *ledger
	fail map[string]error
	// failAt refuses the listed calls (1-based) of a method.
	failAt map[string][]int
	calls  map[string]int
	// steps are the stored step statuses (UpdateStep).
	steps map[int]StepStatus
	// plan is what GetPlan and TransitionPlan start from.
	plan Plan
	// transitions records each TransitionPlan's target and the plan its
	// mutate produced, and each plan EndPlan ended.
	transitions []Plan
	// settled records each SettlePlan's plan as it left it.
	settled []Plan
}

func (f *fakeStore) write(ctx context.Context, method string) error {
	f.log.mu.Lock()
	if f.log.cancelled == nil {
		f.log.cancelled = map[string]bool{}
	}
	f.log.cancelled[method] = ctx.Err() != nil
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[method]++
	n := f.calls[method]
	f.log.mu.Unlock()
	f.log.add("write " + method)
	if slices.Contains(f.failAt[method], n) {
		return errStore
	}
	return f.fail[method]
}

func (f *fakeStore) CreatePlan(ctx context.Context, _ *Plan) error { return f.write(ctx, "CreatePlan") }

func (f *fakeStore) RevisePlan(ctx context.Context, _ string, rev Revision) (Plan, error) {
	p := f.plan
	p.Version, p.Steps = rev.Version, rev.Steps
	return p, f.write(ctx, "RevisePlan")
}

func (f *fakeStore) ApprovePlan(ctx context.Context, _ string, a Approval, rev *Revision) (Plan, error) {
	p := f.plan
	if base := a.Version - boolInt(rev != nil); a.Version != 0 && base != p.Version {
		return Plan{}, apperr.New(apperr.Conflict, "plan %s is version %d", p.ID, p.Version)
	}
	p.Status, p.Approval = StatusExecuting, &a
	if rev != nil {
		p.Version, p.Steps = rev.Version, rev.Steps
	}
	return p, f.write(ctx, "ApprovePlan")
}

func (f *fakeStore) UpdateStep(ctx context.Context, _ string, s Step) error {
	if err := f.write(ctx, "UpdateStep"); err != nil {
		return err
	}
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	if f.steps == nil {
		f.steps = map[int]StepStatus{}
	}
	f.steps[s.Number] = s.Status
	return nil
}

func (f *fakeStore) StartExecution(ctx context.Context, _ AgentRecord, _ AgentSession, _ Execution) error {
	return f.write(ctx, "StartExecution")
}

func (f *fakeStore) FinishExecution(ctx context.Context, _ Execution) error {
	return f.write(ctx, "FinishExecution")
}

func (f *fakeStore) AddReview(ctx context.Context, _ Review) error { return f.write(ctx, "AddReview") }

func (f *fakeStore) CreateAgent(ctx context.Context, _ AgentRecord) error {
	return f.write(ctx, "CreateAgent")
}

func (f *fakeStore) GetPlan(context.Context, string) (Plan, error) { return f.plan, nil }

func (f *fakeStore) TransitionPlan(ctx context.Context, _ string, from []Status, to Status, mutate func(*Plan) error) (Plan, error) {
	if err := f.write(ctx, "TransitionPlan"); err != nil {
		return Plan{}, err
	}
	ok := false
	for _, s := range from {
		ok = ok || s == f.plan.Status
	}
	if !ok {
		return Plan{}, apperr.New(apperr.Conflict, "plan %s is %s", f.plan.ID, f.plan.Status)
	}
	p := f.plan
	p.Status = to
	// The steps as stored (UpdateStep).
	p.Steps = append([]Step(nil), p.Steps...)
	f.log.mu.Lock()
	for i, st := range p.Steps {
		if status, ok := f.steps[st.Number]; ok {
			p.Steps[i].Status = status
		}
	}
	f.log.mu.Unlock()
	if mutate != nil {
		if err := mutate(&p); err != nil {
			return Plan{}, err
		}
	}
	f.transitions = append(f.transitions, p)
	return p, nil
}

// EndPlan ends plan as TransitionPlan does, refusing while a step is
// pending or running as stored (UpdateStep); it records the plan as ended
// in transitions.
func (f *fakeStore) EndPlan(ctx context.Context, e PlanEnd) error {
	if err := f.write(ctx, "EndPlan"); err != nil {
		return err
	}
	if f.plan.Status != StatusExecuting {
		return apperr.New(apperr.Conflict, "plan %s is %s", f.plan.ID, f.plan.Status)
	}
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	for _, st := range f.plan.Steps {
		status := st.Status
		if stored, ok := f.steps[st.Number]; ok {
			status = stored
		}
		if status == StepPending || status == StepRunning {
			return apperr.Wrap(apperr.Conflict, ErrEndsNotStored, "plan %s cannot end: step %d is %s in the store", f.plan.ID, st.Number, status)
		}
	}
	f.transitions = append(f.transitions, e.applied(f.plan))
	return nil
}

// SettlePlan settles a copy of plan (recorded in settled, with the usage it
// was given).
func (f *fakeStore) SettlePlan(ctx context.Context, id, why string, u event.Usage) (Status, error) {
	if err := f.write(ctx, "SettlePlan"); err != nil {
		return "", err
	}
	p := f.plan
	p.ID = id
	if p.Status == StatusInReview {
		p.Status, p.Reason = StatusPendingReview, strings.TrimSpace(why+" "+p.Reason)
	}
	p.Usage = u
	f.log.mu.Lock()
	f.settled = append(f.settled, p)
	f.log.mu.Unlock()
	return p.Status, nil
}

// testBase is a base over store with short windows and a fixed clock.
func testBase(store Store) *base {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	n := 0
	var mu sync.Mutex
	return &base{cfg: Config{Store: store, PersistTimeout: time.Second, MaxSteps: 20, ReviewRounds: 2, SummaryChars: 2000,
		Hub: NewHub(), Now: func() time.Time { return at }, NewID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return "id-" + string(rune('a'+n))
		}}}
}

// agentFunc is an AgentRunner that is a function.
type agentFunc func(ctx context.Context, task agents.Task) (agents.Result, error)

func (f agentFunc) Run(ctx context.Context, task agents.Task) (agents.Result, error) {
	return f(ctx, task)
}

// reviewing is a reviewer agent that calls submit_review with verdict and
// comments (none when verdict is empty), spending 10 tokens in and 5 out.
func reviewing(verdict Verdict, comments string) agentFunc {
	return func(ctx context.Context, task agents.Task) (agents.Result, error) {
		res := agents.Result{Text: "I looked at it.", Usage: event.Usage{InputTokens: 10, OutputTokens: 5}}
		if verdict == "" {
			return res, nil
		}
		args, _ := json.Marshal(SubmitReviewArgs{Verdict: verdict, Comments: comments})
		if _, err := task.Tools[0].Run(ctx, tools.Call{ID: "r", Name: "submit_review", Args: args}); err != nil {
			return agents.Result{}, err
		}
		return res, nil
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
