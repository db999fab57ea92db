package persistence

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
)

// Notifications between processes. On PostgreSQL a Listener holds one
// dedicated connection (pgx, outside the pool) that LISTENs on the channels
// subscribed to and hands each notification to the subscribers; a lost
// connection is opened again with backoff, and since what was sent meanwhile
// is lost, every subscriber is then told it may have missed notices
// (Subscription.Missed). Channel names carry a prefix — by default the
// database's current schema — so that processes that share a database but
// not a schema (tests, a schema per tenant) never hear each other.
//
// NOTIFY is delivered at commit, to every listening session of the
// database, the sender's own process included; at least once (a NOTIFY
// retried after a lost answer may arrive twice), in commit order. A
// notification is a wake-up, not data: receivers read what it announces
// from the tables, and a slow safety poll covers a listener that is
// reconnecting.
//
// The run log's writer NOTIFYs in each batch's transaction the runs and
// plans the batch committed (WakeOnCommit turns them into Feed wakes in the
// other processes). Other users call Notify and Subscribe on channels of
// their own. On SQLite (one process) there is no connection to listen on:
// Notify hands the payload to this process's subscribers directly.

// maxPayload bounds a notification's payload (PostgreSQL refuses 8000 bytes
// and more).
const maxPayload = 7900

// ListenerConfig configures a Listener.
type ListenerConfig struct {
	// Prefix starts every channel's name (default: "pw." and the current
	// schema). Processes that should hear each other use the same.
	Prefix string
	// MinBackoff and MaxBackoff bound the wait before the listener tries
	// to connect again (defaults 50 ms and 5 s; doubled per failure, with
	// jitter).
	MinBackoff, MaxBackoff time.Duration
	// Ping is how long the connection may stay quiet before the listener
	// checks that it is still there (default 30 s).
	Ping   time.Duration
	Logger zerolog.Logger
}

// Subscription receives the notifications of one channel.
type Subscription struct {
	// Channel is the channel's name without the prefix.
	Channel string
	// Notify gets each payload, on the listener's goroutine: it must not
	// block.
	Notify func(payload string)
	// Missed, when set, is called (on the listener's goroutine, must not
	// block) each time the listener starts listening on the channel — at
	// first and after a lost connection — since notifications sent before
	// that were not heard: read again what they would have announced.
	Missed func()
}

// Listener delivers the notifications of PostgreSQL channels to the
// subscribers of this process. Start it, Close it. Safe for concurrent use.
type Listener struct {
	db     *DB
	cfg    ListenerConfig
	origin string // tells this process's notices from others'
	notify *core
	subs   *subscribers

	mu   sync.Mutex
	stop context.CancelCauseFunc
	done chan struct{}
}

// NewListener returns a Listener for db. On PostgreSQL it reads the current
// schema for the default prefix; Start it to listen.
func NewListener(ctx context.Context, db *DB, cfg ListenerConfig) (*Listener, error) {
	if db == nil {
		return nil, errors.New("persistence: NewListener: nil database")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.Ping <= 0 {
		cfg.Ping = 30 * time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return nil, fmt.Errorf("persistence: NewListener: MaxBackoff %s is below MinBackoff %s", cfg.MaxBackoff, cfg.MinBackoff)
	}
	c, err := newCore(db, StoreConfig{})
	if err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "pw"
		if db.driver == DriverPostgres {
			var schema *string
			if err := c.do(ctx, func(g *gorm.DB) error { return g.Raw(`SELECT current_schema()`).Scan(&schema).Error }); err != nil {
				return nil, dbErr("read the current schema", err)
			}
			if schema != nil {
				cfg.Prefix += "." + *schema
			}
		}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Listener{db: db, cfg: cfg, origin: hex.EncodeToString(b), notify: c,
		subs: &subscribers{byChannel: map[string][]*Subscription{}}}, nil
}

// Channel returns the full name of channel name: what to LISTEN on or pass
// to pg_notify, for instance in a transaction of one's own.
func (l *Listener) Channel(name string) string {
	full := l.cfg.Prefix + "." + name
	if len(full) > 63 { // PostgreSQL's identifiers are at most 63 bytes
		sum := sha256.Sum256([]byte(full))
		full = "pw." + hex.EncodeToString(sum[:16])
	}
	return full
}

// Start starts listening (PostgreSQL; on SQLite it does nothing). Close
// stops it.
func (l *Listener) Start() {
	if l.db.driver != DriverPostgres || l.db.pg == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return
	}
	ctx, stop := context.WithCancelCause(context.Background())
	l.stop, l.done = stop, make(chan struct{})
	go l.run(ctx)
}

// errListenerClosed is the cause with which Close ends the listener.
var errListenerClosed = errors.New("listener closed")

// Close stops listening and waits for the listener's goroutine.
func (l *Listener) Close() {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop == nil {
		return
	}
	stop(errListenerClosed)
	<-done
}

// Subscribe adds s (its channel is listened on from the next moment the
// listener can) and returns the function that removes it.
func (l *Listener) Subscribe(s Subscription) (unsubscribe func()) {
	return l.subs.add(l.Channel(s.Channel), &s)
}

// Notify sends payload on channel (its name without the prefix) to every
// process listening, this one included. On SQLite it hands it to this
// process's subscribers. A payload is at most 7900 bytes.
func (l *Listener) Notify(ctx context.Context, channel, payload string) error {
	if len(payload) > maxPayload {
		return apperr.New(apperr.Internal, "persistence: a notification's payload is at most %d bytes", maxPayload)
	}
	if l.db.driver != DriverPostgres {
		l.subs.deliver(l.Channel(channel), payload)
		return nil
	}
	if err := l.notify.do(ctx, func(g *gorm.DB) error {
		return g.Exec(`SELECT pg_notify(?, ?)`, l.Channel(channel), payload).Error
	}); err != nil {
		return dbErr("notify", err)
	}
	return nil
}

// run connects, listens until the connection is lost, and connects again,
// until Close.
func (l *Listener) run(ctx context.Context) {
	defer close(l.done)
	wait := l.cfg.MinBackoff
	for {
		conn, err := l.connect(ctx)
		if err == nil {
			wait = l.cfg.MinBackoff
			err = l.serve(ctx, conn)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		l.cfg.Logger.Warn().Err(err).Dur("retry_in", wait).Msg("listener: connection lost; connecting again")
		t := time.NewTimer(wait/2 + time.Duration(mrand.Int64N(int64(wait/2)+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, l.cfg.MaxBackoff)
	}
}

func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.ConnectConfig(ctx, l.db.pg.Copy())
}

// serve keeps conn LISTENing on the subscribed channels and delivers what
// arrives, until the connection fails or ctx ends.
func (l *Listener) serve(ctx context.Context, conn *pgx.Conn) error {
	listening := map[string]bool{}
	synced := -1
	for {
		gen, want := l.subs.channels()
		if gen != synced {
			fresh, err := l.sync(ctx, conn, listening, want)
			if err != nil {
				return err
			}
			synced = gen
			l.subs.started(fresh)
		}
		wctx, cancel := context.WithTimeout(ctx, l.cfg.Ping)
		if !l.subs.waiting(synced, cancel) {
			cancel()
			continue
		}
		n, err := conn.WaitForNotification(wctx)
		l.subs.waited()
		// Read before cancel, which would make every wait look interrupted
		// (and a dead connection spin here instead of reconnecting).
		werr := wctx.Err()
		quiet := errors.Is(werr, context.DeadlineExceeded)
		cancel()
		switch {
		case err == nil:
			l.subs.deliver(n.Channel, n.Payload)
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case quiet:
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		case werr != nil:
			// Interrupted: the channels changed.
		default:
			return err
		}
	}
}

// sync LISTENs on the channels of want not yet listened on and UNLISTENs
// the others; it returns the channels it started listening on.
func (l *Listener) sync(ctx context.Context, conn *pgx.Conn, listening map[string]bool, want []string) ([]string, error) {
	var fresh []string
	keep := map[string]bool{}
	for _, ch := range want {
		keep[ch] = true
		if listening[ch] {
			continue
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return nil, err
		}
		listening[ch] = true
		fresh = append(fresh, ch)
	}
	for ch := range listening {
		if !keep[ch] {
			if _, err := conn.Exec(ctx, "UNLISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				return nil, err
			}
			delete(listening, ch)
		}
	}
	return fresh, nil
}

// subscribers are a Listener's subscriptions by full channel name, and the
// wait its connection is in, which a change of the channels ends (so that
// the listener LISTENs or UNLISTENs). Safe for concurrent use.
type subscribers struct {
	mu        sync.Mutex
	byChannel map[string][]*Subscription
	gen       int                // bumped when the set of channels changes
	interrupt context.CancelFunc // ends the current wait, when waiting
}

// add adds sub to channel ch and returns the function that removes it.
func (s *subscribers) add(ch string, sub *Subscription) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byChannel[ch]) == 0 {
		s.changedLocked()
	}
	s.byChannel[ch] = append(s.byChannel[ch], sub)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.byChannel[ch] = slices.DeleteFunc(s.byChannel[ch], func(x *Subscription) bool { return x == sub })
			if len(s.byChannel[ch]) == 0 {
				delete(s.byChannel, ch)
				s.changedLocked()
			}
		})
	}
}

// changedLocked notes that the channels changed and ends the current wait
// (mu held).
func (s *subscribers) changedLocked() {
	s.gen++
	if s.interrupt != nil {
		s.interrupt()
	}
}

// channels returns the channels subscribed to, and their generation.
func (s *subscribers) channels() (gen int, want []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	want = make([]string, 0, len(s.byChannel))
	for ch := range s.byChannel {
		want = append(want, ch)
	}
	return s.gen, want
}

// waiting records interrupt as the end of the wait about to start, unless
// the channels changed since generation synced (then it reports false:
// sync first).
func (s *subscribers) waiting(synced int, interrupt context.CancelFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != synced {
		return false
	}
	s.interrupt = interrupt
	return true
}

// waited notes that the wait ended.
func (s *subscribers) waited() {
	s.mu.Lock()
	s.interrupt = nil
	s.mu.Unlock()
}

// deliver hands payload to the subscribers of channel.
func (s *subscribers) deliver(channel, payload string) {
	s.mu.Lock()
	subs := slices.Clone(s.byChannel[channel])
	s.mu.Unlock()
	for _, sub := range subs {
		if sub.Notify != nil {
			sub.Notify(payload)
		}
	}
}

// started tells the subscribers of channels just listened on that they may
// have missed notices.
func (s *subscribers) started(channels []string) {
	var missed []func()
	s.mu.Lock()
	for _, ch := range channels {
		for _, sub := range s.byChannel[ch] {
			if sub.Missed != nil {
				missed = append(missed, sub.Missed)
			}
		}
	}
	s.mu.Unlock()
	for _, f := range missed {
		f()
	}
}

// The run log's commit notices. Each batch's transaction NOTIFYs, on the
// channel "runlog", the runs whose events or end it committed and the plans
// those events (or the runs that ended) were about, with the origin of the
// writer: {"o": origin, "r": [run ids], "p": [plan ids]}, split into as
// many notices as the payload limit asks (one, nearly always).

const commitChannel = "runlog"

type commitNotice struct {
	Origin string   `json:"o"`
	Runs   []string `json:"r,omitempty"`
	Plans  []string `json:"p,omitempty"`
}

// notices returns the payloads announcing a commit of runs and plans.
func (l *Listener) notices(runs, plans []string) []string {
	var out []string
	cur := commitNotice{Origin: l.origin}
	size := 0
	flush := func() {
		if len(cur.Runs)+len(cur.Plans) > 0 {
			b, _ := json.Marshal(cur)
			out = append(out, string(b))
		}
		cur = commitNotice{Origin: l.origin}
		size = 0
	}
	add := func(list *[]string, id string) {
		b, _ := json.Marshal(id)
		if size+len(b)+64 > maxPayload {
			flush()
		}
		*list = append(*list, id)
		size += len(b) + 1
	}
	for _, id := range runs {
		add(&cur.Runs, id)
	}
	for _, id := range plans {
		add(&cur.Plans, id)
	}
	flush()
	return out
}

// Waker is woken for runs and plans whose events another process
// committed (event.Feed is one).
type Waker interface {
	// WakeRuns wakes the followers of runs.
	WakeRuns(ids ...string)
	// WakePlans wakes the watchers of plans.
	WakePlans(ids ...string)
	// WakeAll wakes every follower and watcher: notices may have been
	// lost.
	WakeAll()
}

// WakeOnCommit subscribes w to the commits of the run logs of other
// processes (their writers NOTIFY with RunLogConfig.Listener set): each
// notice wakes its runs and plans, and a listener that starts (again)
// wakes everything. It returns the function that unsubscribes.
func (l *Listener) WakeOnCommit(w Waker) (unsubscribe func()) {
	return l.Subscribe(Subscription{Channel: commitChannel, Missed: w.WakeAll, Notify: func(payload string) {
		if l.ownNotice(payload) {
			return // this process's own commit: its Feed has it already
		}
		var n commitNotice
		if err := json.Unmarshal([]byte(payload), &n); err != nil {
			l.cfg.Logger.Warn().Err(err).Msg("listener: a run log notice that does not parse; waking everything")
			w.WakeAll()
			return
		}
		if n.Origin == l.origin {
			return
		}
		if len(n.Runs) > 0 {
			w.WakeRuns(n.Runs...)
		}
		if len(n.Plans) > 0 {
			w.WakePlans(n.Plans...)
		}
	}})
}

// ownNotice says whether payload is a commit notice of this process,
// without decoding it: every batch's notice comes back to the process that
// sent it, only to be dropped. notices writes the origin first, and an
// origin is hex.
func (l *Listener) ownNotice(payload string) bool {
	return strings.HasPrefix(payload, `{"o":"`+l.origin+`"`)
}
