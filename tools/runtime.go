package tools

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/telemetry"
)

// NoRetries as RuntimeConfig.Retries disables retries.
const NoRetries = -1

// Runtime defaults.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultMaxResultChars = 4000
	DefaultParallelism    = 3
	DefaultRetries        = 2
	DefaultRetryBackoff   = 100 * time.Millisecond
	DefaultRecordTimeout  = 5 * time.Second
)

// The kinds of failure an Outcome's Err can match with errors.Is, besides
// apperr.ErrInvalid (malformed or schema-violating arguments) and the
// apperr codes of errors the tool returned itself.
var (
	// ErrUnknownTool: the call named a tool that was not available.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrTimeout: the tool did not finish within its timeout.
	ErrTimeout = errors.New("timed out")
	// ErrPanic: the tool panicked. The model sees only "internal error".
	ErrPanic = errors.New("panicked")
	// ErrCancelled: the round's context ended before or while the tool ran;
	// the error also wraps the context's cause.
	ErrCancelled = errors.New("cancelled")
)

// RuntimeConfig configures a Runtime. Zero values take the defaults.
type RuntimeConfig struct {
	// Recorder stores every execution. Required.
	Recorder Recorder
	// Now is the clock for timestamps and durations (default time.Now).
	Now func() time.Time
	// NewID generates execution ids (default UUIDv7).
	NewID func() string
	// Logger receives failures, panics (with stacks), retries and recorder
	// errors. The zero Logger discards.
	Logger zerolog.Logger
	// Timeout bounds one attempt of every tool; a Spec.Timeout may only
	// shorten it, or lift it with NoTimeout (default 30 s; NoTimeout here:
	// bounded by the tools' own timeouts and the round's context).
	Timeout time.Duration
	// MaxResultChars is how many characters of a result the model sees; the
	// rest is cut and a marker says how much (default 4000).
	MaxResultChars int
	// Parallelism is how many calls of a round run at once (default 3).
	Parallelism int
	// Retries is how often a failed read-only or idempotent tool is tried again (default
	// 2; NoRetries disables retries).
	Retries int
	// RetryBackoff is the wait before the first retry; it doubles for each
	// further retry (default 100 ms).
	RetryBackoff time.Duration
	// RecordTimeout bounds one Recorder call. Recording does not stop when
	// the round's context ends, so that cancelled calls are recorded too
	// (default 5 s).
	RecordTimeout time.Duration
	// TracerProvider traces each call as a span execute_tool {name}, whose
	// context the tool gets (nil: no-op); CaptureContent records the
	// arguments and the result on it.
	TracerProvider trace.TracerProvider
	CaptureContent bool
	// RunOf names the run a call's context belongs to (runs.RunOf); a
	// call's idempotency key is that run's id, ":" and the call's id. Nil,
	// or "": the call's id alone.
	RunOf func(context.Context) string
	// Approval is the process's approval rules about tools; Holds keeps
	// the calls that wait on a person (a call that needs approval, one in
	// doubt after a takeover). Without Holds a call in doubt is answered
	// ErrInDoubt at once, and a call that needs approval is not run.
	Approval ApprovalRules
	Holds    Holds
}

// Runtime runs rounds of tool calls. It is safe for concurrent use; one
// Runtime serves every agent of the process.
type Runtime struct {
	cfg     RuntimeConfig
	log     zerolog.Logger
	schemas schemaCache
	tracer  telemetry.Tracer
}

// NewRuntime validates cfg, fills in defaults and returns a Runtime. The
// error is an Invalid *apperr.Error naming every bad field.
func NewRuntime(cfg RuntimeConfig) (*Runtime, error) {
	var bad []apperr.FieldError
	fail := func(field, msg string) { bad = append(bad, apperr.FieldError{Field: field, Message: msg}) }
	if cfg.Recorder == nil {
		fail("Recorder", "is required")
	}
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	case cfg.Timeout < 0 && cfg.Timeout != NoTimeout:
		fail("Timeout", "must be positive, or NoTimeout")
	}
	switch {
	case cfg.MaxResultChars == 0:
		cfg.MaxResultChars = DefaultMaxResultChars
	case cfg.MaxResultChars < 0:
		fail("MaxResultChars", "must be positive")
	}
	switch {
	case cfg.Parallelism == 0:
		cfg.Parallelism = DefaultParallelism
	case cfg.Parallelism < 0:
		fail("Parallelism", "must be positive")
	}
	switch {
	case cfg.Retries == 0:
		cfg.Retries = DefaultRetries
	case cfg.Retries == NoRetries:
		cfg.Retries = 0
	case cfg.Retries < 0:
		fail("Retries", "must be positive, or NoRetries")
	}
	switch {
	case cfg.RetryBackoff == 0:
		cfg.RetryBackoff = DefaultRetryBackoff
	case cfg.RetryBackoff < 0:
		fail("RetryBackoff", "must be positive")
	}
	switch {
	case cfg.RecordTimeout == 0:
		cfg.RecordTimeout = DefaultRecordTimeout
	case cfg.RecordTimeout < 0:
		fail("RecordTimeout", "must be positive")
	}
	if len(bad) > 0 {
		return nil, apperr.Invalidf(bad, "invalid tool runtime config")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = newUUIDv7
	}
	if cfg.RunOf == nil {
		cfg.RunOf = func(context.Context) string { return "" }
	}
	return &Runtime{cfg: cfg, log: cfg.Logger, tracer: telemetry.NewTracer(cfg.TracerProvider, cfg.CaptureContent)}, nil
}

func newUUIDv7() string { return uuid.Must(uuid.NewV7()).String() }

// RunRound runs one round of a model's tool calls against the tools
// available to it and returns one Outcome per call, in call order.
//
// Up to Parallelism calls run at once. For each call RunRound emits tool_call
// through call.Events when the call starts, then validates its arguments
// against the tool's schema (every violation is reported; the tool does not
// run), records a SideEffect call as started (durably, before its tool
// runs), runs it with its timeout, panic recovery and — for read-only and
// idempotent tools — retries, truncates the content, records the
// execution and, last, emits tool_result. Each call's tool gets its
// idempotency key in its context (IdempotencyKey). A call with a Prior
// that is a SideEffect is not run: it is in doubt (ErrInDoubt). A call of the gateway's tool_exec is announced, run and
// recorded as the tool it names.
//
// When ctx ends, calls not yet started do not run; they report ErrCancelled
// (and are announced and recorded as such), as do running calls that fail
// because of it. Tools must return once their context is done: RunRound
// waits for every call it started, so no goroutine outlives it.
func (r *Runtime) RunRound(ctx context.Context, available []Tool, calls []Call) []Outcome {
	out := make([]Outcome, len(calls))
	if len(calls) == 1 || r.cfg.Parallelism == 1 {
		for i := range calls {
			r.run(ctx, available, &calls[i], &out[i])
		}
		return out
	}
	sem := make(chan struct{}, r.cfg.Parallelism)
	var wg sync.WaitGroup
	for i := range calls {
		acquired := false
		if ctx.Err() == nil {
			select {
			case sem <- struct{}{}:
				acquired = true
			case <-ctx.Done():
			}
		}
		if !acquired || ctx.Err() != nil {
			if acquired {
				<-sem
			}
			r.run(ctx, available, &calls[i], &out[i]) // reports ErrCancelled without running
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.run(ctx, available, &calls[i], &out[i])
		}()
	}
	wg.Wait()
	return out
}

// run handles one call from announcement to tool_result and sets *o.
//
// Its frame is kept small — the call and its outcome by pointer, the events
// built in announce and conclude — because the goroutine of an agent's
// tool round waits in it (in execute) for as long as the tool runs: a
// parked goroutine's stack only shrinks while it uses less than a quarter
// of it, so every kilobyte of frames below the wait can double the stack
// each executor keeps.
func (r *Runtime) run(ctx context.Context, available []Tool, call *Call, o *Outcome) {
	start := r.cfg.Now()
	ctx, span := r.startSpan(ctx, call)
	var eff Call
	x := r.open(ctx, call)
	tool, err := r.announce(ctx, available, call, &eff)
	var res Result
	if err == nil {
		res, err = r.execute(ctx, tool, eff, start, &x)
	}
	r.conclude(ctx, call, &eff, start, res, err, &x, o)
	r.endSpan(span, call, &eff, o)
}

// callRun is what the runtime knows of one call between its start and its
// record.
type callRun struct {
	id, key string      // the record's id (the Prior's, if any); the idempotency key
	class   EffectClass // the tool's, once resolved
	started bool        // recorded CallStarted before the tool was called
	inDoubt bool        // a Prior that is not run again
	policy  ApprovalPolicy
	// edited are the arguments a person approved the call with, when they
	// edited them: the call ran with these.
	edited json.RawMessage
}

// open gives a call its record id and idempotency key.
func (r *Runtime) open(ctx context.Context, call *Call) callRun {
	x := callRun{key: keyOf(r.cfg.RunOf(ctx), call.ID)}
	if call.Prior != nil && call.Prior.ID != "" {
		x.id = call.Prior.ID
	} else {
		x.id = r.cfg.NewID()
	}
	return x
}

// startSpan starts the call's span execute_tool {name}.
//
//go:noinline
func (r *Runtime) startSpan(ctx context.Context, call *Call) (context.Context, trace.Span) {
	return r.tracer.StartTool(ctx, telemetry.Tool{Name: call.Name, CallID: call.ID, Arguments: string(call.Args)})
}

// endSpan ends a call's span with its outcome; a gateway's tool_exec is
// named after the tool it ran.
//
//go:noinline
func (r *Runtime) endSpan(span trace.Span, call, eff *Call, o *Outcome) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if eff.Name != "" && eff.Name != call.Name {
		span.SetName("execute_tool " + eff.Name)
		span.SetAttributes(semconv.GenAIToolName(eff.Name))
	}
	if o.Effect != "" {
		span.SetAttributes(telemetry.ToolEffectKey.String(string(o.Effect)))
	}
	r.tracer.EndTool(span, o.Content, o.Err)
}

// announce resolves a call's tool and sets *eff to the call as that tool
// sees it, emits tool_call, and says why the tool is not to run, if so.
//
//go:noinline
func (r *Runtime) announce(ctx context.Context, available []Tool, call, eff *Call) (Tool, error) {
	tool, resolved, err := r.resolve(available, *call)
	*eff = resolved
	call.Events.Emit(ctx, event.ToolCall{ToolCall: event.ToolCallInfo{ID: eff.ID, Name: eff.Name, Arguments: jsonOrString(eff.Args)}})
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("tool %q was not run: %w: %w", eff.Name, ErrCancelled, context.Cause(ctx))
	}
	return tool, err
}

// conclude makes a call's outcome from what its tool returned (res, err),
// records it and emits its tool_result.
//
//go:noinline
func (r *Runtime) conclude(ctx context.Context, call, eff *Call, start time.Time, res Result, err error, x *callRun, out *Outcome) {
	// A tool's text reaches the model, the client and the database, and
	// none of them takes invalid UTF-8 (PostgreSQL refuses it): bytes that
	// are not UTF-8 (a Latin-1 page, binary output) become U+FFFD.
	res.Content = strings.ToValidUTF8(res.Content, "\uFFFD")

	o := Outcome{Call: *call, Success: err == nil, Result: res, Err: err, Duration: r.cfg.Now().Sub(start), Effect: x.class}
	var text string
	if err == nil {
		text = res.Content
		o.Content = truncate(text, r.cfg.MaxResultChars)
	} else {
		text = truncate(strings.ToValidUTF8(r.errorText(ctx, *eff, err), "\uFFFD"), r.cfg.MaxResultChars)
		o.Content = "error: " + text
		o.Result = Result{Effects: res.Effects}
	}
	r.record(ctx, *eff, start, o, text, x)
	ev := event.ToolResult{ToolCallID: eff.ID, Name: eff.Name, Success: o.Success, DurationMS: o.Duration.Milliseconds()}
	if o.Success {
		ev.Result = o.Content
	} else {
		ev.Error = text
	}
	call.Events.Emit(ctx, ev)
	*out = o
}

// resolve finds the tool a call names among the available ones and, for the
// gateway's tool_exec, the tool it names: eff is then the call as that tool
// sees it (same id, scope and emitter; the real name and arguments). It has
// no side effects.
func (r *Runtime) resolve(available []Tool, call Call) (Tool, Call, error) {
	tool := find(available, call.Name)
	if tool == nil {
		return nil, call, fmt.Errorf("%w %q; available tools: %s", ErrUnknownTool, call.Name, orNone(names(available)))
	}
	x, ok := tool.(*execTool)
	if !ok {
		return tool, call, nil
	}
	args, err := x.decode(call.Args)
	if err != nil {
		return nil, call, err
	}
	eff := call
	eff.Name, eff.Args = args.Name, args.Arguments
	inner := x.g.find(args.Name)
	if inner == nil {
		return nil, eff, fmt.Errorf("%w %q; call tool_help for the catalog of tools", ErrUnknownTool, args.Name)
	}
	return inner, eff, nil
}

func find(available []Tool, name string) Tool {
	for _, t := range available {
		if t != nil && t.Spec().Name == name {
			return t
		}
	}
	return nil
}

func names(ts []Tool) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if t != nil {
			out = append(out, t.Spec().Name)
		}
	}
	return out
}

// execute validates the arguments and runs the tool, retrying a
// repeatable (read-only or idempotent) tool after a retryable failure. A
// SideEffect call is recorded as started first, and not run when that
// record cannot be stored; one an earlier attempt started (call.Prior) is
// in doubt and not run at all.
func (r *Runtime) execute(ctx context.Context, tool Tool, call Call, start time.Time, x *callRun) (Result, error) {
	spec := tool.Spec()
	x.class = spec.Class()
	if p := call.Prior; p != nil && p.Unfinished() {
		if was := cmp.Or(p.Effect, x.class); !was.Repeatable() {
			// The earlier attempt's start stands until a person decides:
			// a wait that is cut (this attempt lost or cancelled) leaves
			// the record started, so the next attempt finds the call in
			// doubt again rather than "cancelled before it ran".
			x.class, x.started = was, true
			if again, res, err := r.resolveInDoubt(ctx, call, x); !again {
				return res, err
			}
		}
	}
	schema, err := r.schema(tool, spec)
	if err != nil {
		return Result{}, apperr.Wrap(apperr.Internal, err, "tool %q has an invalid schema", spec.Name)
	}
	if err := schema.validate(call.Args); err != nil {
		return Result{}, err
	}
	if err := r.approve(ctx, &call, spec.Schema, schema, x); err != nil {
		return Result{}, err
	}
	if !x.class.Repeatable() {
		if err := r.recordStart(ctx, call, start, x); err != nil {
			return Result{}, err
		}
	}
	timeout := effectiveTimeout(r.cfg.Timeout, spec.Timeout)
	retries := 0
	if x.class.Repeatable() {
		retries = r.cfg.Retries
	}
	backoff := r.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		res, err := r.attempt(ctx, tool, call, timeout, x.key)
		if err == nil || attempt >= retries || !retryable(ctx, err) {
			return res, err
		}
		r.log.Warn().Ctx(ctx).Err(err).Str("tool", spec.Name).Str("tool_call_id", call.ID).
			Int("attempt", attempt+1).Dur("backoff", backoff).Msg("tool failed; retrying")
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return Result{}, fmt.Errorf("tool %q %w while waiting to retry: %w", spec.Name, ErrCancelled, context.Cause(ctx))
		case <-t.C:
		}
		backoff *= 2
	}
}

// approve waits for a person's approval of a call that needs it (its
// policy: ApprovalRules.For) and leaves call with the arguments approved.
// Edited arguments are checked against the tool's schema again.
func (r *Runtime) approve(ctx context.Context, call *Call, raw json.RawMessage, schema *argsSchema, x *callRun) error {
	x.policy = r.cfg.Approval.For(call.Name, call.Approval)
	if !x.policy.Requires(x.class) {
		return nil
	}
	if r.cfg.Holds == nil {
		return fmt.Errorf("the call to %s needs the user's approval, and nothing here can wait for one; it was not run", call.Name)
	}
	orig := call.Args
	if err := r.hold(ctx, call, raw, x); err != nil {
		return err
	}
	if !bytes.Equal(orig, call.Args) {
		x.edited = call.Args
		return schema.validate(call.Args)
	}
	return nil
}

// recordStart stores that a SideEffect call starts, before its tool is
// called: the Recorder returns once the record is durable, so a process
// that dies while the tool runs leaves the call in doubt for the next
// owner instead of unknown. A call whose start cannot be recorded is not
// run.
func (r *Runtime) recordStart(ctx context.Context, call Call, start time.Time, x *callRun) error {
	e := r.execution(call, start, x)
	e.State = CallStarted
	rctx, cancel := context.WithTimeout(ctx, r.cfg.RecordTimeout)
	defer cancel()
	err := r.cfg.Recorder.RecordToolExecution(rctx, e)
	switch {
	case err == nil:
		x.started = true
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("tool %q was not run: %w: %w", call.Name, ErrCancelled, context.Cause(ctx))
	}
	r.log.Error().Ctx(ctx).Err(err).Str("tool", call.Name).Str("tool_call_id", call.ID).
		Str("execution_id", x.id).Msg("recording that a tool call starts failed; it is not run")
	return apperr.New(apperr.Unavailable, "the call of %s was not run: its start could not be recorded; try again later", call.Name)
}

// effectiveTimeout is the bound of one attempt: the runtime's timeout,
// unless the tool's own is shorter; NoTimeout on the tool lifts it (0: no
// bound but the context).
func effectiveTimeout(runtime, tool time.Duration) time.Duration {
	switch {
	case tool == NoTimeout:
		return 0
	case runtime == NoTimeout:
		return max(tool, 0)
	case tool > 0 && tool < runtime:
		return tool
	}
	return runtime
}

// schema returns the compiled schema of a tool: its own if it carries one,
// else the runtime's cached compilation of its Spec.Schema.
func (r *Runtime) schema(tool Tool, spec Spec) (*argsSchema, error) {
	if c, ok := tool.(compiled); ok {
		return c.compiledSchema()
	}
	return r.schemas.get(spec.Schema)
}

// errTimedOut is the cause of an attempt's context when its timeout fires.
var errTimedOut = errors.New("tool timeout")

// attempt runs the tool once under its timeout, turning a panic into an
// error and classifying context errors as a timeout or a cancellation.
func (r *Runtime) attempt(ctx context.Context, tool Tool, call Call, timeout time.Duration, key string) (res Result, err error) {
	runCtx, cancel := WithIdempotencyKey(ctx, key), context.CancelFunc(func() {})
	if timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(runCtx, timeout, errTimedOut)
	}
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			r.log.Error().Ctx(ctx).Str("tool", call.Name).Str("tool_call_id", call.ID).
				Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack()).Msg("tool panicked")
			res, err = Result{}, &apperr.Error{
				Code:    apperr.Internal,
				Message: "internal error",
				Err:     fmt.Errorf("tool %q %w: %v", call.Name, ErrPanic, p),
			}
		}
	}()
	res, err = tool.Run(runCtx, call)
	if err == nil {
		return res, nil
	}
	switch {
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("tool %q %w: %w", call.Name, ErrCancelled, context.Cause(ctx))
	case errors.Is(context.Cause(runCtx), errTimedOut):
		return Result{}, fmt.Errorf("tool %q %w after %s", call.Name, ErrTimeout, timeout)
	}
	// A tool's own error may still come with effects (the turn waits on
	// the user).
	return Result{Effects: res.Effects}, err
}

// retryable reports whether a failed attempt may be tried again: not once
// the round's context has ended, not after a panic (a bug does not go away),
// and not when the tool blamed its input (the same call fails again).
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, ErrPanic) || errors.Is(err, ErrCancelled) {
		return false
	}
	switch apperr.CodeOf(err) { // a plain error is Internal here: retried
	case apperr.Invalid, apperr.NotFound, apperr.Unauthorized, apperr.Conflict, apperr.TooLarge:
		return false
	}
	return true
}

// errorText is what the model (and the record) sees of a failure: for an
// *apperr.Error its message and field problems — "internal error" when its
// code is Internal, the details being logged — and for any other error its
// text. Invalid arguments are listed one violation per line.
func (r *Runtime) errorText(ctx context.Context, call Call, err error) string {
	var argErr *argumentsError
	if errors.As(err, &argErr) {
		return violationText(call.Name, argErr)
	}
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		if !errors.Is(err, ErrCancelled) && !errors.Is(err, ErrInDoubt) {
			r.log.Warn().Ctx(ctx).Err(err).Str("tool", call.Name).Str("tool_call_id", call.ID).Msg("tool failed")
		}
		return err.Error()
	}
	if ae.Code == apperr.Internal {
		if !errors.Is(err, ErrPanic) { // a panic was logged with its stack
			r.log.Error().Ctx(ctx).Err(err).Str("tool", call.Name).Str("tool_call_id", call.ID).Msg("tool failed with an internal error")
		}
		return "internal error"
	}
	return (&apperr.Error{Code: ae.Code, Message: ae.Message, Fields: ae.Fields}).Error()
}

// record stores the execution. A recorder failure is logged, never returned:
// the model's round goes on. Recording outlives the round's context (bounded
// by RecordTimeout) so that cancelled calls are recorded too. A SideEffect
// call cancelled while its tool ran stays CallStarted: what it did is
// unknown.
func (r *Runtime) record(ctx context.Context, call Call, start time.Time, o Outcome, text string, x *callRun) {
	e := r.execution(call, start, x)
	e.Success = o.Success
	e.Cancelled = !o.Success && errors.Is(o.Err, ErrCancelled)
	e.DurationMS = o.Duration.Milliseconds()
	switch {
	case x.inDoubt:
		e.State = CallInDoubt
	case x.started && e.Cancelled:
		e.State = CallStarted
	}
	if o.Success {
		e.Result = o.Content
	} else {
		e.Error = text
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.RecordTimeout)
	defer cancel()
	if err := r.cfg.Recorder.RecordToolExecution(rctx, e); err != nil {
		r.log.Error().Ctx(ctx).Err(err).Str("tool", call.Name).Str("tool_call_id", call.ID).
			Str("execution_id", e.ID).Msg("recording tool execution failed")
	}
}

// execution is the record of call as it starts (State CallFinished).
func (r *Runtime) execution(call Call, start time.Time, x *callRun) Execution {
	if x.edited != nil {
		call.Args = x.edited
	}
	return Execution{
		ID:             x.id,
		UserID:         call.Scope.UserID,
		SessionID:      call.Scope.SessionID,
		ToolCallID:     call.ID,
		ToolName:       call.Name,
		Arguments:      jsonOrString(call.Args),
		Effect:         x.class,
		IdempotencyKey: x.key,
		State:          CallFinished,
		Source:         call.Events.Source(),
		CreatedAt:      start,
	}
}

// jsonOrString returns raw if it is valid JSON, {} if it is empty, and
// otherwise raw as a JSON string, so that malformed arguments can still be
// announced in an event and stored in a JSON column.
func jsonOrString(raw json.RawMessage) json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return json.RawMessage("{}")
	}
	if json.Valid(trimmed) {
		return raw
	}
	s, _ := json.Marshal(string(raw)) // a string always marshals
	return s
}

// truncate cuts s to max characters (runes) and appends a marker saying how
// many were cut.
func truncate(s string, max int) string {
	if len(s) <= max { // bytes ≥ runes: no rune count needed
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	cut := 0
	for i := range s {
		if cut == max {
			var b strings.Builder
			b.Grow(i + 64)
			b.WriteString(s[:i])
			fmt.Fprintf(&b, "\n[… truncated: %d of %d characters cut]", n-max, n)
			return b.String()
		}
		cut++
	}
	return s
}
