package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// Defaults of Config.
const (
	DefaultTimeout = 24 * time.Hour
	DefaultPoll    = time.Second
)

// Config configures a Service.
type Config struct {
	// Store keeps the holds. Required.
	Store Store
	// Timeout is how long a hold waits before it times out: an approval is
	// then rejected with reason "timeout", a call in doubt answered as in
	// doubt (default 24 h).
	Timeout time.Duration
	// Poll is how often a waiter reads its hold, for decisions taken in
	// another process (default 1 s).
	Poll time.Duration
	// Now is the clock (default time.Now); NewID makes record ids
	// (default UUIDv7); NewTicker the poll's ticker (default
	// time.NewTicker).
	Now       func() time.Time
	NewID     func() string
	NewTicker func(time.Duration) Ticker
	Logger    zerolog.Logger
}

// Ticker is what a waiter polls with (time.Ticker's).
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// Service records and waits for holds, and takes people's decisions. It is
// safe for concurrent use; one Service serves the process.
type Service struct {
	cfg   Config
	mu    sync.Mutex
	wakes map[string]chan struct{}
}

// New validates cfg (every bad field is named), fills in its defaults and
// returns a Service.
func New(cfg Config) (*Service, error) {
	var bad apperr.Problems
	bad.Required("Store", cfg.Store == nil)
	if cfg.Timeout < 0 {
		bad.Add("Timeout", "must be positive, got %v", cfg.Timeout)
	}
	if cfg.Poll < 0 {
		bad.Add("Poll", "must be positive, got %v", cfg.Poll)
	}
	if err := bad.Err("approval: invalid config"); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.NewTicker == nil {
		cfg.NewTicker = func(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }
	}
	return &Service{cfg: cfg, wakes: map[string]chan struct{}{}}, nil
}

var _ tools.Holds = (*Service)(nil)

// Await records h as pending and announces it (tool_approval_requested
// or tool_call_in_doubt, with the record, once: a hold an earlier attempt
// of the run recorded is waited for again, not announced again), then
// waits until it is decided, it times out or ctx ends (its cause is
// returned).
func (s *Service) Await(ctx context.Context, h tools.Hold) (tools.Answer, error) {
	key := keyOf(h.RunID, h.CallID, h.Kind)
	wake := s.wakeOf(key)
	defer s.forget(key)
	rec, err := s.open(ctx, h)
	if err != nil {
		return tools.Answer{}, err
	}
	tick := s.cfg.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for rec.State == Pending {
		if !s.cfg.Now().Before(rec.ExpiresAt) {
			rec, err = s.expire(ctx, rec)
			if err != nil {
				return tools.Answer{}, err
			}
			continue
		}
		timer := time.NewTimer(rec.ExpiresAt.Sub(s.cfg.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return tools.Answer{}, context.Cause(ctx)
		case <-wake:
			wake = s.wakeOf(key)
		case <-tick.C():
		case <-timer.C:
		}
		timer.Stop()
		next, err := s.cfg.Store.Hold(ctx, h.RunID, h.CallID, h.Kind)
		switch {
		case err == nil:
			rec = next
		case ctx.Err() != nil:
			return tools.Answer{}, context.Cause(ctx)
		default: // the next tick reads again
			s.cfg.Logger.Warn().Ctx(ctx).Err(err).Str("run_id", h.RunID).Str("tool_call_id", h.CallID).Msg("reading a tool call's hold failed")
		}
	}
	return rec.Answer(), nil
}

// open returns the hold of h, recording and announcing it if it is new.
func (s *Service) open(ctx context.Context, h tools.Hold) (Record, error) {
	rec, err := s.cfg.Store.Hold(ctx, h.RunID, h.CallID, h.Kind)
	if err == nil || apperr.CodeOf(err) != apperr.NotFound {
		return rec, err
	}
	now := s.cfg.Now().UTC()
	rec = Record{ID: s.cfg.NewID(), RunID: h.RunID, CallID: h.CallID, Kind: h.Kind, UserID: h.Scope.UserID,
		SessionID: h.Scope.SessionID, Tool: h.Tool, Arguments: h.Arguments, Effect: h.Effect, Schema: h.Schema, Reason: h.Reason,
		Source: h.Events.Source(), State: Pending, CreatedAt: now, ExpiresAt: now.Add(s.cfg.Timeout)}
	hold := event.ToolHold{RunID: h.RunID, CallID: h.CallID, Tool: h.Tool, Arguments: h.Arguments, Effect: string(h.Effect),
		StepNumber: rec.Source.StepNumber, Reason: h.Reason}
	var ev event.Event = event.ToolApprovalRequested{ToolHold: hold}
	details := "waiting for the user to approve a call to " + h.Tool
	if h.Kind == tools.HoldInDoubt {
		ev = event.ToolCallInDoubt{ToolHold: hold}
		details = "waiting for the user to say what became of a call to " + h.Tool
	}
	err = h.Events.Record(ctx, ev, func(ctx context.Context) error {
		r := rec
		return s.cfg.Store.CreateHold(ctx, &r)
	})
	if apperr.CodeOf(err) == apperr.Conflict { // recorded meanwhile: wait for that one
		return s.cfg.Store.Hold(ctx, h.RunID, h.CallID, h.Kind)
	}
	if err != nil {
		return Record{}, err
	}
	h.Events.Emit(ctx, event.AgentState{State: event.StateWaitingOnUser, Details: details})
	return rec, nil
}

// expire decides a hold past its time as timed out, unless a person
// decided it meanwhile, and returns it as it is now.
func (s *Service) expire(ctx context.Context, rec Record) (Record, error) {
	err := s.cfg.Store.DecideHolds(ctx, rec.RunID, []Decided{{ID: rec.ID, State: TimedOut, Reason: "timeout",
		By: "system", At: s.cfg.Now().UTC()}})
	if err != nil && apperr.CodeOf(err) != apperr.Conflict {
		return rec, err
	}
	return s.cfg.Store.Hold(ctx, rec.RunID, rec.CallID, rec.Kind)
}

func keyOf(runID, callID string, k tools.HoldKind) string {
	return runID + "\x00" + callID + "\x00" + string(k)
}

// wakeOf is the channel closed when a hold of key is decided here.
func (s *Service) wakeOf(key string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.wakes[key]
	if !ok {
		ch = make(chan struct{})
		s.wakes[key] = ch
	}
	return ch
}

func (s *Service) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.wakes, key)
}

func (s *Service) wake(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.wakes[key]; ok {
		close(ch)
		delete(s.wakes, key)
	}
}

// Request is one person's decision about a held call of a run.
type Request struct {
	CallID   string
	Decision tools.Decision
	// Arguments, with approve, replace the call's (checked against the
	// tool's schema; the record keeps both).
	Arguments json.RawMessage
	Reason    string
	// Result, with mark_done, is what the model is told the call returned.
	Result string
}

// Decide takes decisions about runID's pending holds for by (who may
// decide is the caller's to check: the run's owner), all or none: a
// request that is not well formed, names a decision that does not fit the
// hold, or edits arguments the tool's schema refuses is Invalid, naming
// every problem (decisions[i]…); a call that has no pending hold is a
// Conflict. It returns the decided records and wakes their waiters.
func (s *Service) Decide(ctx context.Context, runID, by string, reqs []Request) ([]Record, error) {
	holds, err := s.cfg.Store.RunHolds(ctx, runID)
	if err != nil {
		return nil, err
	}
	pending := map[string]Record{}
	for _, h := range holds {
		if h.State == Pending {
			pending[h.CallID] = h
		}
	}
	now := s.cfg.Now().UTC()
	ds, recs, err := s.check(reqs, pending, holds, by, now)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Store.DecideHolds(ctx, runID, ds); err != nil {
		return nil, err
	}
	for i := range recs {
		d := ds[i]
		recs[i].State, recs[i].EditedArguments, recs[i].DecisionReason, recs[i].Result = d.State, d.EditedArguments, d.Reason, d.Result
		recs[i].DecidedBy, recs[i].DecidedAt = d.By, &d.At
		s.wake(keyOf(runID, recs[i].CallID, recs[i].Kind))
	}
	return recs, nil
}

// check turns the requests into decisions of the pending holds, or says
// what is wrong with them.
func (s *Service) check(reqs []Request, pending map[string]Record, holds []Record, by string, now time.Time) ([]Decided, []Record, error) {
	var bad apperr.Problems
	if len(reqs) == 0 {
		bad.Add("decisions", "must hold at least one decision")
	}
	seen := map[string]bool{}
	var missing []string
	ds, recs := make([]Decided, 0, len(reqs)), make([]Record, 0, len(reqs))
	for i, q := range reqs {
		f := fmt.Sprintf("decisions[%d]", i)
		if q.CallID == "" {
			bad.Add(f+".call_id", "is required")
			continue
		}
		if seen[q.CallID] {
			bad.Add(f+".call_id", "%q is decided twice", q.CallID)
			continue
		}
		seen[q.CallID] = true
		rec, ok := pending[q.CallID]
		if !ok {
			missing = append(missing, q.CallID)
			continue
		}
		checkOne(&bad, f, q, rec)
		d := Decided{ID: rec.ID, State: stateOf(q.Decision), Reason: q.Reason, Result: q.Result, By: by, At: now}
		if q.Decision == tools.Approve && len(q.Arguments) > 0 {
			d.EditedArguments = q.Arguments
		}
		ds, recs = append(ds, d), append(recs, rec)
	}
	if err := bad.Err("invalid tool call decisions"); err != nil {
		return nil, nil, err
	}
	if len(missing) > 0 {
		return nil, nil, apperr.New(apperr.Conflict, "%s", notPending(missing, holds))
	}
	return ds, recs, nil
}

// checkOne checks one request against its pending hold.
func checkOne(bad *apperr.Problems, f string, q Request, rec Record) {
	if !q.Decision.Fits(rec.Kind) {
		want := "approve or reject"
		if rec.Kind == tools.HoldInDoubt {
			want = "retry, mark_done or fail"
		}
		bad.Add(f+".decision", "call %s %s: the decision must be %s, got %q", rec.CallID, waitsFor(rec.Kind), want, q.Decision)
		return
	}
	if len(q.Arguments) > 0 && q.Decision != tools.Approve {
		bad.Add(f+".arguments", "only an approval may edit the arguments")
	}
	if q.Result != "" && q.Decision != tools.MarkDone {
		bad.Add(f+".result", "only mark_done gives a result")
	}
	if q.Decision != tools.Approve || len(q.Arguments) == 0 {
		return
	}
	if err := tools.ValidateArgsAgainst(rec.Tool, rec.Schema, q.Arguments); err != nil {
		fields := apperr.FieldsOf(err)
		if len(fields) == 0 {
			bad.Add(f+".arguments", "%s", apperr.MessageOf(err))
		}
		for _, fe := range fields {
			bad.Add(f+".arguments"+strings.TrimSuffix(fe.Field, "/"), "%s", fe.Message)
		}
	}
}

func waitsFor(k tools.HoldKind) string {
	if k == tools.HoldInDoubt {
		return "is in doubt"
	}
	return "waits for approval"
}

// notPending says why calls cannot be decided.
func notPending(callIDs []string, holds []Record) string {
	last := map[string]Record{}
	for _, h := range holds {
		last[h.CallID] = h
	}
	msg := ""
	for i, id := range callIDs {
		if i > 0 {
			msg += "; "
		}
		if h, ok := last[id]; ok {
			msg += fmt.Sprintf("call %s is not pending: it was %s", id, h.State)
		} else {
			msg += fmt.Sprintf("call %s of this run waits for nothing", id)
		}
	}
	return msg
}

// Holds lists runID's holds, oldest first.
func (s *Service) Holds(ctx context.Context, runID string) ([]Record, error) {
	return s.cfg.Store.RunHolds(ctx, runID)
}

// ExecutionHolds lists the holds of an executor's calls, oldest first.
func (s *Service) ExecutionHolds(ctx context.Context, executionID string) ([]Record, error) {
	return s.cfg.Store.ExecutionHolds(ctx, executionID)
}

// Pending lists userID's pending holds (the store's every-user value:
// everyone's).
func (s *Service) Pending(ctx context.Context, userID string) ([]Record, error) {
	return s.cfg.Store.PendingHolds(ctx, userID)
}
