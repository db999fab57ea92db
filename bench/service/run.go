package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// result is what one workload measured on one driver.
type result struct {
	Driver   string
	Workload workload
	// Wall is the median turn of a sequential workload, the whole shot of a
	// concurrent one.
	Wall time.Duration
	// FirstEventP50/P99 are over every measured turn.
	FirstEventP50, FirstEventP99 time.Duration
	// CPUPerTurn is the server's CPU time (user + system) during the
	// measured turns, divided by their number; 0 when /proc is unreadable.
	CPUPerTurn time.Duration
	// CPUByTurn is the server's CPU time during each measured turn of a
	// sequential workload, in order (read between turns; the last turn
	// ends at the same reading as CPUPerTurn's, so they add up to its
	// total): a fresh server's first turns pay for what its start left
	// to do, which the mean hides. Nil for a concurrent workload, for
	// -paired turns and when /proc is unreadable.
	CPUByTurn []time.Duration
	// ThenCPU is the server's CPU time during each of the workload's Then
	// turns, after the measured ones: a warm server's. Nil when there are
	// none or /proc is unreadable.
	ThenCPU []time.Duration
	// DBCPUPerTurn is the CPU time of the server's PostgreSQL backends
	// during the measured turns, divided by their number; 0 on SQLite and
	// when the database is not on this machine.
	DBCPUPerTurn time.Duration
	// SwitchesPerTurn is how often the server's threads were switched off
	// their CPU during the measured turns (procSwitches), divided by their
	// number; 0 when /proc is unreadable.
	SwitchesPerTurn float64
	// FaultsPerTurn is how many page faults the server took during the
	// measured turns (procFaults), divided by their number, when
	// FaultsMeasured (not when /proc is unreadable; a warm server may
	// take none). A fresh server faults its heap in over its first turns.
	FaultsPerTurn  float64
	FaultsMeasured bool
	// WrittenPerTurn is how many bytes the server wrote during the
	// measured turns (procWritten), divided by their number, when
	// WrittenMeasured (not when /proc is unreadable).
	WrittenPerTurn  float64
	WrittenMeasured bool
	// CommitsPerTurn is how many transactions the server's run log
	// committed during the measured turns (planwright_runlog_batches_total
	// in its /metrics), divided by their number, when CommitsMeasured: what
	// a turn's writes cost the database most directly.
	CommitsPerTurn  float64
	CommitsMeasured bool
	// PeakRSS is the server's VmHWM after the workload, in bytes.
	PeakRSS int64
	// Failures are the turns that did not end as they must, and anything
	// else that went wrong; a result with failures has no valid figures.
	Failures []string
}

// runWorkload starts a server for w on the driver with env's binaries, runs
// the turns, checks each one over the API, stops the server and returns
// the figures.
func runWorkload(ctx context.Context, env *environment, driver string, w workload) (res result, err error) {
	b, err := startBench(ctx, env, env.bin, driver, w)
	if err != nil {
		return result{Driver: driver, Workload: w}, err
	}
	defer func() { res, err = b.stop(err) }()
	if !b.warm(ctx) {
		return
	}
	var rec *recorder
	if env.perfDir != "" {
		if rec, err = startPerf(env.perfDir, driver+"-"+w.Name, b.srv.PID); err != nil {
			return
		}
	}
	before := b.sample(true)
	start := time.Now()
	turns := make([]turnResult, w.Turns)
	if w.Concurrent {
		var wg sync.WaitGroup
		gate := make(chan struct{})
		if env.dialInShot {
			for i := range turns {
				wg.Go(func() {
					<-gate
					turns[i] = b.c.turn(ctx, w)
				})
			}
		} else {
			ready, err := b.c.prepareShot(ctx, w, w.Turns)
			if err != nil {
				return b.res, err
			}
			for i, t := range ready {
				wg.Go(func() {
					<-gate
					turns[i] = t.run(ctx, w)
				})
			}
		}
		start = time.Now()
		close(gate)
		wg.Wait()
	} else {
		for i := range turns {
			if i > 0 {
				b.turnEnded()
			}
			turns[i] = b.c.turn(ctx, w)
		}
	}
	shot := time.Since(start)
	after := b.sample(false)
	if rec != nil {
		if err := rec.stop(); err != nil {
			b.res.Failures = append(b.res.Failures, err.Error())
		}
	}
	b.figures(ctx, turns, shot, before, after)
	if !w.Concurrent && len(b.res.Failures) == 0 {
		b.then(ctx)
	}
	return
}

// then runs the workload's Then turns after the measured ones and reads
// the server's CPU around each (ThenCPU); a turn that does not end as it
// must is a failure like a measured one's.
func (b *bench) then(ctx context.Context) {
	var cpu []time.Duration
	for i := range b.w.Then {
		start, err := procCPU(b.srv.PID, b.env.tick)
		t := b.c.turn(ctx, b.w)
		end, endErr := procCPU(b.srv.PID, b.env.tick)
		if t.Err == nil {
			t.Err = b.c.verify(ctx, b.w, t)
		}
		if t.Err != nil {
			b.res.Failures = append(b.res.Failures, fmt.Sprintf("turn %d after the measured ones: %v", i+1, t.Err))
			return
		}
		if err = errors.Join(err, endErr); err != nil {
			b.env.note("server CPU of the turns after the measured ones not measured: %v", err)
			return
		}
		cpu = append(cpu, end-start)
	}
	b.res.ThenCPU = cpu
}

// runPaired runs a sequential workload on two servers at once, one of each
// tree's binaries (-paired): each measured turn starts on both together
// (which one first turns every turn), so whatever the machine does during
// the measurement weighs on both alike, and their figures are measured
// over the same moments. It returns the two results in the order of bins.
func runPaired(ctx context.Context, env *environment, driver string, w workload, bins [2]binaries) (res [2]result, err error) {
	if w.Concurrent {
		return res, fmt.Errorf("%s is a concurrent workload: not paired", w.Name)
	}
	var bs [2]*bench
	defer func() {
		for i, b := range bs {
			if b != nil {
				res[i], err = b.stop(err)
			} else {
				res[i] = result{Driver: driver, Workload: w}
			}
		}
	}()
	for i, bin := range bins {
		if bs[i], err = startBench(ctx, env, bin, driver, w); err != nil {
			return
		}
	}
	for _, b := range bs {
		if !b.warm(ctx) {
			return
		}
	}
	var before, after [2]sample
	for i, b := range bs {
		before[i] = b.sample(true)
	}
	var turns [2][]turnResult
	for n := range w.Turns {
		first, second := bs[n%2], bs[1-n%2]
		var r [2]turnResult
		var wg sync.WaitGroup
		wg.Go(func() { r[n%2] = first.c.turn(ctx, w) })
		r[1-n%2] = second.c.turn(ctx, w)
		wg.Wait()
		turns[0], turns[1] = append(turns[0], r[0]), append(turns[1], r[1])
	}
	for i, b := range bs {
		after[i] = b.sample(false)
	}
	for i, b := range bs {
		b.figures(ctx, turns[i], 0, before[i], after[i])
	}
	return
}

// bench is one workload's server, started, with a client of it and the
// result its measurement fills in.
type bench struct {
	env *environment
	w   workload
	srv *server
	c   *client
	// dbCPU, on PostgreSQL, is the CPU its backends used so far.
	dbCPU func() (map[int]time.Duration, error)
	// drop removes its PostgreSQL schema.
	drop func() error
	// turnsCPU are the server's CPU readings at the ends of a sequential
	// workload's turns but the last (turnEnded), turnsCPUErr the last
	// that failed.
	turnsCPU    []time.Duration
	turnsCPUErr error
	res         result
}

// startBench starts a server of bin for w on the driver: a fresh SQLite
// file, or a fresh PostgreSQL schema.
func startBench(ctx context.Context, env *environment, bin binaries, driver string, w workload) (*bench, error) {
	b := &bench{env: env, w: w, res: result{Driver: driver, Workload: w}}
	dir, err := os.MkdirTemp(env.dir, driver+"-"+w.Name+"-")
	if err != nil {
		return nil, err
	}
	setup := serverSetup{Bin: bin, Dir: dir, Driver: driver, Workload: w, DSN: filepath.Join(dir, "planwright.db")}
	if driver == "postgres" {
		schema, dsn, drop, err := env.pg.freshSchema(ctx)
		if err != nil {
			return nil, err
		}
		b.dbCPU = func() (map[int]time.Duration, error) { return env.pg.backendCPU(ctx, schema, env.tick) }
		b.drop = func() error {
			if env.keep {
				// Kept with the directory, for a look at the rows.
				env.keptSchemas = append(env.keptSchemas, schema)
				return nil
			}
			return drop()
		}
		setup.DSN = dsn
	}
	if b.srv, err = startServer(ctx, setup); err != nil {
		if b.drop != nil {
			err = errors.Join(err, b.drop())
		}
		return nil, err
	}
	b.c = newClient(b.srv.URL)
	return b, nil
}

// warm runs the workload's warm-up turns; false (a failure recorded) when
// one did not end as it must.
func (b *bench) warm(ctx context.Context) bool {
	for range b.w.Warmups {
		if r := b.c.turn(ctx, b.w); r.Err != nil {
			b.res.Failures = append(b.res.Failures, "warm-up turn: "+r.Err.Error())
			return false
		}
	}
	return true
}

// stop stops the server and drops its schema, and returns the result and
// err joined with what went wrong there; a result with failures keeps the
// temporary directory.
func (b *bench) stop(err error) (result, error) {
	b.c.close()
	if serr := b.srv.stop(); serr != nil {
		b.res.Failures = append(b.res.Failures, serr.Error())
	}
	if len(b.res.Failures) > 0 {
		b.res.Failures = append(b.res.Failures, "server log: "+b.srv.Log)
		b.env.keep = true
	}
	if b.drop != nil {
		if derr := b.drop(); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	return b.res, err
}

// sample is what a server had used at one moment.
type sample struct {
	cpu        time.Duration
	cpuErr     error
	sw         int64
	swErr      error
	pf         int64
	pfErr      error
	written    int64
	writtenErr error
	db         map[int]time.Duration
	dbErr      error
	commits    float64
	commitsErr error
}

// turnEnded reads the server's CPU time at the end of a sequential
// workload's turn but its last (CPUByTurn).
func (b *bench) turnEnded() {
	cpu, err := procCPU(b.srv.PID, b.env.tick)
	if err != nil {
		b.turnsCPUErr = err
	}
	b.turnsCPU = append(b.turnsCPU, cpu)
}

// splitByTurn is each turn's share of the server's CPU time from before to
// after, split at the readings turnEnded took; nil when they are not one
// a turn but the last, or one of them failed.
func (b *bench) splitByTurn(before, after time.Duration, turns int) []time.Duration {
	if b.turnsCPUErr != nil || len(b.turnsCPU) != turns-1 || turns < 2 {
		return nil
	}
	marks := append(append([]time.Duration{before}, b.turnsCPU...), after)
	by := make([]time.Duration, turns)
	for i := range by {
		by[i] = marks[i+1] - marks[i]
	}
	return by
}

// sample reads what the server has used so far. Its run log's commits come
// from a scrape of its /metrics, which costs the server some CPU of its
// own: before the measured turns (before) they are read first and after
// them last, so that the scrapes fall outside what the turns are measured
// by.
func (b *bench) sample(before bool) sample {
	var s sample
	if before {
		s.commits, s.commitsErr = b.c.commits()
	}
	s.cpu, s.cpuErr = procCPU(b.srv.PID, b.env.tick)
	s.sw, s.swErr = procSwitches(b.srv.PID)
	s.pf, s.pfErr = procFaults(b.srv.PID)
	s.written, s.writtenErr = procWritten(b.srv.PID)
	if b.dbCPU != nil {
		s.db, s.dbErr = b.dbCPU()
	}
	if !before {
		s.commits, s.commitsErr = b.c.commits()
	}
	return s
}

// figures checks the turns over the API and fills in the result's figures
// from them and from what the server used between before and after; shot
// is a concurrent workload's wall.
func (b *bench) figures(ctx context.Context, turns []turnResult, shot time.Duration, before, after sample) {
	res, env := &b.res, b.env
	rss, rssErr := procPeakRSS(b.srv.PID)
	var walls, firsts []time.Duration
	for i, t := range turns {
		if t.Err == nil {
			t.Err = b.c.verify(ctx, b.w, t)
		}
		if t.Err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("turn %d: %v", i+1, t.Err))
			continue
		}
		walls = append(walls, t.Wall)
		firsts = append(firsts, t.FirstEvent)
	}
	if b.w.Concurrent {
		res.Wall = shot
	} else {
		res.Wall = median(walls)
	}
	res.FirstEventP50, res.FirstEventP99 = percentile(firsts, 50), percentile(firsts, 99)
	if err := errors.Join(before.cpuErr, after.cpuErr); err == nil {
		res.CPUPerTurn = (after.cpu - before.cpu) / time.Duration(len(turns))
		res.CPUByTurn = b.splitByTurn(before.cpu, after.cpu, len(turns))
	} else {
		env.note("server CPU not measured: %v", err)
	}
	if err := errors.Join(before.swErr, after.swErr); err == nil {
		res.SwitchesPerTurn = float64(after.sw-before.sw) / float64(len(turns))
	} else {
		env.note("server context switches not measured: %v", err)
	}
	if err := errors.Join(before.pfErr, after.pfErr); err == nil {
		res.FaultsPerTurn, res.FaultsMeasured = float64(after.pf-before.pf)/float64(len(turns)), true
	} else {
		env.note("server page faults not measured: %v", err)
	}
	if err := errors.Join(before.writtenErr, after.writtenErr); err == nil {
		res.WrittenPerTurn, res.WrittenMeasured = float64(after.written-before.written)/float64(len(turns)), true
	} else {
		env.note("bytes the server wrote not measured: %v", err)
	}
	if err := errors.Join(before.commitsErr, after.commitsErr); err == nil {
		res.CommitsPerTurn, res.CommitsMeasured = (after.commits-before.commits)/float64(len(turns)), true
	} else {
		env.note("run log commits not measured: %v", err)
	}
	if b.dbCPU != nil {
		if err := errors.Join(before.dbErr, after.dbErr); err == nil {
			res.DBCPUPerTurn = cpuSince(before.db, after.db) / time.Duration(len(turns))
		} else {
			env.note("database CPU not measured: %v", err)
		}
	}
	if rssErr == nil {
		res.PeakRSS = rss
	} else {
		env.note("server peak RSS not measured: %v", rssErr)
	}
}
