// Package runs executes runs — chat turns, plan approvals and resumes — as
// jobs, on whichever replica takes them. A handler creates a run with its
// job (Create) and follows the run's log; the job system calls Work on some
// process, which claims the run (its owner, under a lease with a fencing
// token), rebuilds the work from the run's rows through the Work function
// of the run's kind, and runs it with an emitter that appends to the run's
// log. While it runs, the owner renews its leases and picks up cancels
// asked on any replica (Cancel records them on the run); a run whose owner
// died is taken over by another process once its lease expired (every
// process looks on its renew tick; TakeOver, a periodic task of the job
// system's leader, does too); on SIGTERM the owner hands
// its runs over at once (HandOver). A process that lost a run writes
// nothing more of it: its log checks the token, and its work is cancelled
// with agents.OwnerLost.
package runs

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/logctx"
	"github.com/planwright/planwright/pkg/telemetry"
)

// CancelRequest is a cancel asked of a run on any replica.
type CancelRequest struct {
	// Cause is the run's cancellation cause (an agents.CancelCause).
	Cause string `json:"cause,omitempty"`
	// PlanID, when set, asks to cancel that plan (which the run runs) by
	// UserID (an operator when Operator), not the run itself.
	PlanID   string `json:"plan_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	Operator bool   `json:"operator,omitempty"`
}

// State is what a run's owner checks of it while it runs.
type State struct {
	ID         string
	Status     string
	Owner      string
	LeaseToken int64
	Cancel     *CancelRequest
}

// Store keeps queued runs and their leases (persistence.Jobs implements it).
type Store interface {
	// CreateRun stores a new run with its first event (seq 1) and its job,
	// in one transaction; a taken id is a Conflict.
	CreateRun(ctx context.Context, r *event.Run, first event.Envelope) error
	// Claim makes owner the run's owner under a lease of ttl with a new
	// token; false when it is finished or a live process owns it.
	Claim(ctx context.Context, runID, owner string, ttl time.Duration) (event.Run, bool, error)
	// Renew extends owner's leases to ttl from now.
	Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error)
	// Release frees a run owned with token and queues it again.
	Release(ctx context.Context, runID string, token int64) (bool, error)
	// TakeOverExpired frees and queues again the runs whose lease expired,
	// and queues again those still unclaimed that were created or last
	// queued before unclaimedBefore: their job may have died with the
	// process that fetched it before it claimed the run.
	TakeOverExpired(ctx context.Context, unclaimedBefore time.Time) ([]string, error)
	// RequestCancel records a cancel of userID's running run.
	RequestCancel(ctx context.Context, userID, runID string, req CancelRequest) error
	// RunStates returns the states of runs.
	RunStates(ctx context.Context, ids []string) ([]State, error)
	// ContinueTrace records the trace context a run's later attempts
	// continue (its first owner's span), while token is still the run's.
	ContinueTrace(ctx context.Context, runID string, token int64, traceID, spanID string) error
}

// Log is the run log (persistence.RunLog implements it).
type Log interface {
	// OpenRun opens runID's log for appends with fencing token token,
	// after its last stored event, whose seq it returns.
	OpenRun(ctx context.Context, runID string, token int64) (int64, error)
	// OpenFirstClaim is OpenRun for a run's first claim, whose log is its
	// first event alone (seq 1): nothing is read.
	OpenFirstClaim(runID string, token int64) (int64, error)
	Appender
	Finish(runID, status string)
	// Events returns runID's committed events after seq after, in order,
	// at most limit (0: all).
	Events(ctx context.Context, runID string, after int64, limit int) ([]event.Envelope, error)
}

// Feed fans a run's committed events out to this process's followers
// (event.Feed implements it; the run log publishes to it).
type Feed interface {
	// Open makes runID live here, its events after seq after to come.
	Open(runID string, after int64)
	// Close ends runID here: its followers read the store from then on.
	Close(runID string)
}

// Work runs one run: it rebuilds the work from r (its kind, user, session,
// plan and Request) and runs it, emitting to em, ending with done. Attempt
// 2 and later are takeovers.
type Work func(ctx context.Context, r event.Run, em event.Emitter)

// Run statuses, as the log stores them.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Config configures a Service.
type Config struct {
	Store Store
	Log   Log
	// Feed, when set, gets each run this process works opened (and closed
	// when it is lost), so followers here are woken by its commits rather
	// than by polling the store.
	Feed Feed
	// Kinds are the Work of each run kind.
	Kinds map[string]Work
	// Owner names this process (unique per process start).
	Owner string
	// LeaseTimeout is how long after its owner died a run is taken over
	// at most (default 30 s): leases last two thirds of it, and are renewed
	// and checked every sixth.
	LeaseTimeout time.Duration
	// PollInterval is how often the owner checks its runs for cancels and
	// lost leases (default 500 ms).
	PollInterval time.Duration
	// CancelPlan cancels a plan running in this process (planning.Control).
	CancelPlan func(ctx context.Context, planID, userID string, operator bool) error
	// InterruptOrphaned, when set, interrupts the live plans that no
	// unfinished run is about and that did not change since idleSince
	// (persistence.Plans): TakeOver calls it with a lease timeout ago, so a
	// plan whose claim outlived its process (it died before creating the
	// plan's run) can be resumed instead of staying executing.
	InterruptOrphaned func(ctx context.Context, idleSince time.Time) (int, error)
	// OnTakeOver is called for each run this process takes after another
	// owner lost it (the metrics' failovers).
	OnTakeOver func()
	Now        func() time.Time
	Logger     zerolog.Logger
	// TracerProvider traces each run this process works as a span
	// run {kind} (nil: no-op).
	TracerProvider trace.TracerProvider
}

// Service runs queued runs in this process: it creates runs, works those
// the job system gives it, and carries out cancels; its leases keep the
// runs it works its own (Start, Stop, TakeOver, HandOver, Drain). It is
// safe for concurrent use.
type Service struct {
	cfg    Config
	runs   *owned
	leases *leases
	tracer telemetry.Tracer
}

// active is one run this process works.
type active struct {
	token  int64
	cancel context.CancelCauseFunc
	// lost is set once the run is not this process's any more: its sink
	// drops what follows.
	mu       sync.Mutex
	lost     bool
	canceled bool // a cancel request was carried out
	// ended is closed once the attempt's Work returned: nothing of it
	// writes any more.
	ended chan struct{}
}

func (a *active) lose() {
	a.mu.Lock()
	a.lost = true
	a.mu.Unlock()
	a.cancel(agents.OwnerLost)
}

func (a *active) isLost() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

// carryOut carries out a cancel asked of the run, once: a plan's cancel
// by cancelPlan (in a goroutine of its own: it waits until the plan's run
// ended), the run's by cancelling its work with the cause asked.
func (a *active) carryOut(ctx context.Context, req CancelRequest, cancelPlan func(ctx context.Context, planID, userID string, operator bool) error, log zerolog.Logger) {
	a.mu.Lock()
	if a.canceled {
		a.mu.Unlock()
		return
	}
	a.canceled = true
	a.mu.Unlock()
	if req.PlanID != "" && cancelPlan != nil {
		go func() {
			// Cancelling a plan waits until its run ended: not on the loop.
			if err := cancelPlan(context.WithoutCancel(ctx), req.PlanID, req.UserID, req.Operator); err != nil {
				log.Warn().Err(err).Str("plan_id", req.PlanID).Msg("cancel a plan asked on another replica")
			}
		}()
		return
	}
	cause, err := agents.ParseCancelCause(req.Cause)
	if err != nil {
		cause = agents.UserCancelled
	}
	a.cancel(cause)
}

// New validates cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	var bad apperr.Problems
	bad.Required("Store", cfg.Store == nil)
	bad.Required("Log", cfg.Log == nil)
	bad.Required("Owner", cfg.Owner == "")
	bad.Required("Kinds", len(cfg.Kinds) == 0)
	apperr.Positive(&bad, "LeaseTimeout", &cfg.LeaseTimeout, 30*time.Second)
	apperr.Positive(&bad, "PollInterval", &cfg.PollInterval, 500*time.Millisecond)
	if err := bad.Err("runs: invalid config"); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	runs := &owned{active: map[string]*active{}}
	return &Service{cfg: cfg, runs: runs, leases: &leases{cfg: cfg, runs: runs},
		tracer: telemetry.NewTracer(cfg.TracerProvider, false)}, nil
}

// LeaseTTL is how long one lease lasts.
func (s *Service) LeaseTTL() time.Duration { return s.leases.ttl() }

// Every is how often leases are renewed and expired ones looked for.
func (s *Service) Every() time.Duration { return s.leases.every() }

// Create stores run r with its first event and its job (the handler's
// part: the run then runs wherever a worker takes it), with the trace
// context of ctx's span, which the run's spans continue.
func (s *Service) Create(ctx context.Context, r *event.Run, first event.Envelope) error {
	if r.TraceID == "" {
		// The run continues the trace of the request that creates it, on
		// whichever process works it.
		r.TraceID, r.SpanID = telemetry.IDs(ctx)
	}
	return s.cfg.Store.CreateRun(ctx, r, first)
}

// Cancel records a cancel of userID's running run (from any replica); when
// this process owns the run it is carried out at once, else its owner
// picks it up within PollInterval. A run that is not running is NotFound.
func (s *Service) Cancel(ctx context.Context, userID, runID string, req CancelRequest) error {
	if err := s.cfg.Store.RequestCancel(ctx, userID, runID, req); err != nil {
		return err
	}
	if a := s.runs.get(runID); a != nil {
		a.carryOut(ctx, req, s.cfg.CancelPlan, s.cfg.Logger)
	}
	return nil
}

// Work claims and runs runID (the job system's worker calls it). A run that
// is finished or owned by a live process is left alone. Its error is the
// store's (the job is retried); the run's own failure is in its log.
func (s *Service) Work(ctx context.Context, runID string) error {
	r, ok, err := s.cfg.Store.Claim(ctx, runID, s.cfg.Owner, s.LeaseTTL())
	if err != nil || !ok {
		return err
	}
	log := s.cfg.Logger.With().Str("run_id", r.ID).Str("kind", r.Kind).Int("attempt", r.Attempts).Logger()
	// What the work logs names the run and its user, as a handler's lines
	// do (the request's line names the run too).
	ctx = logctx.With(logctx.With(ctx, "run_id", r.ID), "user", r.UserID)
	ctx = WithRun(ctx, r.ID)
	if r.Attempts == 1 {
		ctx = WithFirstClaim(ctx)
	}
	if r.Attempts > 1 {
		log.Info().Msg("taking over a run")
		if s.cfg.OnTakeOver != nil {
			s.cfg.OnTakeOver()
		}
	}
	if err := s.supersede(ctx, r.ID, log); err != nil {
		_, _ = s.cfg.Store.Release(context.WithoutCancel(ctx), r.ID, r.LeaseToken)
		return err
	}
	var last int64
	before := toldIn(nil)
	if r.Attempts == 1 {
		// Nobody owned it before: its log is the first event its creation
		// stored.
		last, err = s.cfg.Log.OpenFirstClaim(r.ID, r.LeaseToken)
	} else if last, err = s.cfg.Log.OpenRun(ctx, r.ID, r.LeaseToken); err == nil {
		// What the earlier attempts told is not told again (announcedSink).
		before, err = s.toldBefore(ctx, r.ID, last)
	}
	if err != nil {
		// Not ours to run after all; free it for another attempt.
		_, _ = s.cfg.Store.Release(context.WithoutCancel(ctx), r.ID, r.LeaseToken)
		return err
	}
	if s.cfg.Feed != nil {
		s.cfg.Feed.Open(r.ID, last)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a := &active{token: r.LeaseToken, cancel: cancel, ended: make(chan struct{})}
	defer close(a.ended)
	defer s.runs.track(r.ID, a)()

	sink := NewLogSink(s.cfg.Log, r.ID, a.isLost, log)
	// WithCommits: the run log takes each Record's write and commits it in
	// the transaction that stores the event announcing it (DESIGN: Runs).
	em := event.NewEmitter(&announcedSink{next: sink, told: before}, event.Source{Role: event.RoleSystem}, s.cfg.Now).WithCommits()
	work, known := s.cfg.Kinds[r.Kind]
	if !known {
		sys := em.With(event.Source{Role: event.RoleSystem})
		sys.Emit(wctx, event.Error{Error: event.ErrorInfo{Code: string(apperr.Internal), Message: "internal error"}})
		log.Error().Msg("no work for this run kind")
	} else {
		sctx, span := s.startRun(wctx, r)
		s.continueTrace(ctx, r, span, log)
		work(sctx, r, em)
		s.endRun(span, sink)
	}
	if a.isLost() {
		log.Info().Msg("run handed over; another process continues it")
		if s.cfg.Feed != nil {
			s.cfg.Feed.Close(r.ID) // its followers here read the new owner's events from the store
		}
		return nil
	}
	if !sink.Ended() {
		// Every run ends with done, also one whose work forgot.
		sink.Emit(context.WithoutCancel(ctx), event.Envelope{TS: s.cfg.Now().UTC(), Source: event.Source{Role: event.RoleSystem},
			Event: event.Done{FinishedReason: event.FinishedError}})
	}
	s.cfg.Log.Finish(r.ID, sink.Status())
	return nil
}

// supersede ends this process's earlier attempt at runID if one still
// works it: the run was taken over from this very process (its lease ran
// out while it was busy) before its poll noticed. That attempt loses the
// run (its sink drops what follows, its work is cancelled with
// agents.OwnerLost) and is awaited before the new attempt opens the log,
// so that nothing it still writes is stored under the new token.
func (s *Service) supersede(ctx context.Context, runID string, log zerolog.Logger) error {
	earlier := s.runs.get(runID)
	if earlier == nil {
		return nil
	}
	log.Warn().Msg("this process still works an earlier attempt of the run; it stops first")
	earlier.lose()
	select {
	case <-earlier.ended:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// toldBefore reads what runID's log, whose last event is last, told
// before this attempt.
func (s *Service) toldBefore(ctx context.Context, runID string, last int64) (*told, error) {
	if last == 0 {
		return toldIn(nil), nil
	}
	evs, err := s.cfg.Log.Events(ctx, runID, 0, 0)
	if err != nil {
		return nil, err
	}
	return toldIn(evs), nil
}

// startRun starts the span of the run's work on this process.
func (s *Service) startRun(ctx context.Context, r event.Run) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{telemetry.RunIDKey.String(r.ID), telemetry.RunKindKey.String(r.Kind),
		telemetry.RunAttemptKey.Int(r.Attempts)}
	if r.SessionID != "" {
		attrs = append(attrs, semconv.GenAIConversationID(r.SessionID))
	}
	if r.PlanID != "" {
		attrs = append(attrs, telemetry.PlanIDKey.String(r.PlanID))
	}
	ctx = telemetry.Continue(ctx, r.TraceID, r.SpanID)
	var opts []trace.SpanStartOption
	if r.Attempts > 1 {
		// A takeover: the same trace, linked to the first owner's span.
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
				Attributes: []attribute.KeyValue{telemetry.LinkKindKey.String("takeover")}}))
		}
	}
	return s.tracer.Start(ctx, "run "+r.Kind, attrs, opts...)
}

// continueTrace records the first owner's run span on the run, so that a
// process that takes the run over continues the trace from it.
func (s *Service) continueTrace(ctx context.Context, r event.Run, span trace.Span, log zerolog.Logger) {
	sc := span.SpanContext()
	if r.Attempts != 1 || !span.IsRecording() || !sc.IsSampled() {
		return
	}
	if err := s.cfg.Store.ContinueTrace(ctx, r.ID, r.LeaseToken, sc.TraceID().String(), sc.SpanID().String()); err != nil {
		log.Warn().Ctx(ctx).Err(err).Msg("record the run's trace; a takeover starts its spans from the request's")
	}
}

// endRun ends the run's span with how the run ended here.
func (s *Service) endRun(span trace.Span, sink *LogSink) {
	if sink.Ended() {
		st := sink.Status()
		span.SetAttributes(attribute.String("planwright.run.status", st))
		if st == StatusFailed {
			telemetry.Fail(span, "the run failed")
		}
	}
	span.End()
}

// Start starts the loop that renews this process's leases and picks up
// cancels and lost runs. Stop ends it.
// A Service stopped before it started never starts.
func (s *Service) Start() { s.leases.start() }

// Stop ends the loop (after HandOver or once no run is left). It is
// idempotent.
func (s *Service) Stop() { s.leases.stop() }

// TakeOver frees and queues again the runs whose owner stopped renewing
// their lease (the leader's periodic task; every process's loop does that
// part too).
// It also interrupts orphaned plans (Config.InterruptOrphaned).
func (s *Service) TakeOver(ctx context.Context) error {
	err := s.leases.takeOverExpired(ctx)
	if err != nil || s.cfg.InterruptOrphaned == nil {
		return err
	}
	n, err := s.cfg.InterruptOrphaned(ctx, s.cfg.Now().Add(-s.cfg.LeaseTimeout))
	if n > 0 {
		s.cfg.Logger.Warn().Int("plans", n).Msg("plans that no run was running were interrupted; they can be resumed")
	}
	return err
}

// HandOver releases every run this process still works — each is queued
// again at once for another process (or this one's next start) — and
// cancels their work with agents.OwnerLost: nothing more of them is
// written here. It returns how many it handed over.
func (s *Service) HandOver(ctx context.Context) int { return s.leases.handOver(ctx) }

// Fetcher is the job system as Drain stops it (persistence.Jobs).
type Fetcher interface {
	// Stop stops fetching and waits for the running jobs, or ctx.
	Stop(ctx context.Context) error
	// StopAndCancel cancels the running jobs and waits for them, or ctx.
	StopAndCancel(ctx context.Context) error
}

// Drain is a replica's part of a graceful shutdown: jobs stops fetching
// and its running runs get window to finish; those still going then are
// handed over (HandOver: another replica, or this one's next start,
// continues them at once), their work is cancelled and awaited (ctx
// bounds it all), and the loop stops. It returns how many runs it handed
// over.
func (s *Service) Drain(ctx context.Context, jobs Fetcher, window time.Duration) (int, error) {
	defer s.Stop()
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	if err := jobs.Stop(wctx); err == nil {
		return 0, nil
	}
	n := s.HandOver(context.WithoutCancel(ctx))
	s.cfg.Logger.Info().Int("runs", n).Msg("runs still going after the drain window were handed over")
	return n, jobs.StopAndCancel(ctx)
}

// Running reports how many runs this process works now.
func (s *Service) Running() int { return s.runs.count() }

// Appender is the part of the run log a LogSink writes to.
type Appender interface {
	Append(runID string, e event.Envelope) (int64, error)
	// AppendEnd appends the run's done and records its end in the batch
	// that stores it.
	AppendEnd(runID string, e event.Envelope, status string) (int64, error)
}

// LogSink appends a run's events to its log, done last (with the run's
// end, so no batch holds one without the other), and remembers how the
// run ended. Once lost says the run is another process's, it drops
// everything.
type LogSink struct {
	log    Appender
	runID  string
	lost   func() bool
	logger zerolog.Logger
	mu     sync.Mutex
	done   *event.Done
}

// NewLogSink returns the sink of runID's events; lost may be nil (the run
// cannot be lost). Append failures are logged with logger.
func NewLogSink(log Appender, runID string, lost func() bool, logger zerolog.Logger) *LogSink {
	if lost == nil {
		lost = func() bool { return false }
	}
	return &LogSink{log: log, runID: runID, lost: lost, logger: logger}
}

func (s *LogSink) Emit(ctx context.Context, e event.Envelope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil || s.lost() {
		return // done is always last
	}
	d, isDone := e.Event.(event.Done)
	if isDone {
		s.done = &d
	}
	var err error
	if isDone {
		// The run's row says how it ended in the batch that stores done
		// (a Finish after the work returned would come a batch later, and a
		// follower that saw done could read the run as still running).
		_, err = s.log.AppendEnd(s.runID, e, s.statusLocked())
	} else {
		_, err = s.log.Append(s.runID, e)
	}
	if err != nil {
		s.logger.Error().Ctx(ctx).Err(err).Str("run_id", s.runID).Msg("append to the run log")
	}
}

// Ended reports whether the run's done was emitted.
func (s *LogSink) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done != nil
}

// Status is the run's status from its done event (failed without one).
func (s *LogSink) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *LogSink) statusLocked() string {
	if s.done == nil {
		return StatusFailed
	}
	switch s.done.FinishedReason {
	case event.FinishedCompleted, event.FinishedLimit:
		return StatusCompleted
	case event.FinishedCancelled:
		return StatusCancelled
	}
	return StatusFailed
}

// runKey is the context key of the run a context's work belongs to.
type runKey struct{}

// WithRun returns ctx carrying runID: the work Work runs belongs to that
// run, so that a write it queues without an event (a transcript message, a
// tool call's record) is fenced with the run's events when another process
// takes the run over.
func WithRun(ctx context.Context, runID string) context.Context {
	return context.WithValue(ctx, runKey{}, runID)
}

// RunOf is the run ctx's work belongs to ("" when none).
func RunOf(ctx context.Context) string {
	id, _ := ctx.Value(runKey{}).(string)
	return id
}

// firstClaimKey marks the context of a run's first claim.
type firstClaimKey struct{}

// WithFirstClaim returns ctx saying its work is its run's first claim (Work
// says so when the run's attempts are 1; see FirstClaim).
func WithFirstClaim(ctx context.Context) context.Context {
	return context.WithValue(ctx, firstClaimKey{}, true)
}

// FirstClaim reports whether ctx's work is its run's first claim (Work on
// a run no process owned before): nothing of the run can be stored yet but
// what its creation stored, so a record keyed by the run (its planner's
// agent) is new, and need not be looked for.
func FirstClaim(ctx context.Context) bool {
	first, _ := ctx.Value(firstClaimKey{}).(bool)
	return first
}
