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
	// DBCPUPerTurn is the CPU time of the server's PostgreSQL backends
	// during the measured turns, divided by their number; 0 on SQLite and
	// when the database is not on this machine.
	DBCPUPerTurn time.Duration
	// SwitchesPerTurn is how often the server's threads were switched off
	// their CPU during the measured turns (procSwitches), divided by their
	// number; 0 when /proc is unreadable.
	SwitchesPerTurn float64
	// PeakRSS is the server's VmHWM after the workload, in bytes.
	PeakRSS int64
	// Failures are the turns that did not end as they must, and anything
	// else that went wrong; a result with failures has no valid figures.
	Failures []string
}

// runWorkload starts a server for w on the driver, runs the turns, checks
// each one over the API, stops the server and returns the figures.
func runWorkload(ctx context.Context, env *environment, driver string, w workload) (res result, err error) {
	res = result{Driver: driver, Workload: w}
	dir, err := os.MkdirTemp(env.dir, driver+"-"+w.Name+"-")
	if err != nil {
		return res, err
	}
	setup := serverSetup{Bin: env.bin, Dir: dir, Driver: driver, Workload: w, DSN: filepath.Join(dir, "planwright.db")}
	var dbCPU func() (map[int]time.Duration, error) // the server's backends' CPU so far (PostgreSQL)
	if driver == "postgres" {
		schema, dsn, drop, err := env.pg.freshSchema(ctx)
		if err != nil {
			return res, err
		}
		dbCPU = func() (map[int]time.Duration, error) { return env.pg.backendCPU(ctx, schema, env.tick) }
		defer func() {
			if env.keep {
				// Kept with the directory, for a look at the rows.
				env.keptSchemas = append(env.keptSchemas, schema)
				return
			}
			if derr := drop(); derr != nil {
				err = errors.Join(err, derr)
			}
		}()
		setup.DSN = dsn
	}
	srv, err := startServer(ctx, setup)
	if err != nil {
		return res, err
	}
	defer func() {
		if serr := srv.stop(); serr != nil {
			res.Failures = append(res.Failures, serr.Error())
		}
		if len(res.Failures) > 0 {
			res.Failures = append(res.Failures, "server log: "+srv.Log)
			env.keep = true
		}
	}()
	c := newClient(srv.URL)
	defer c.close()

	for range w.Warmups {
		if r := c.turn(ctx, w); r.Err != nil {
			res.Failures = append(res.Failures, "warm-up turn: "+r.Err.Error())
			return res, nil
		}
	}
	var rec *recorder
	if env.perfDir != "" {
		if rec, err = startPerf(env.perfDir, driver+"-"+w.Name, srv.PID); err != nil {
			return res, err
		}
	}
	cpu0, cpuErr := procCPU(srv.PID, env.tick)
	sw0, swErr := procSwitches(srv.PID)
	var db0 map[int]time.Duration
	var dbErr error
	if dbCPU != nil {
		db0, dbErr = dbCPU()
	}
	start := time.Now()
	turns := make([]turnResult, w.Turns)
	if w.Concurrent {
		var wg sync.WaitGroup
		gate := make(chan struct{})
		if env.dialInShot {
			for i := range turns {
				wg.Go(func() {
					<-gate
					turns[i] = c.turn(ctx, w)
				})
			}
		} else {
			ready, err := c.prepareShot(ctx, w, w.Turns)
			if err != nil {
				return res, err
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
			turns[i] = c.turn(ctx, w)
		}
	}
	shot := time.Since(start)
	cpu1, cpuErr1 := procCPU(srv.PID, env.tick)
	sw1, swErr1 := procSwitches(srv.PID)
	var db1 map[int]time.Duration
	if dbCPU != nil && dbErr == nil {
		db1, dbErr = dbCPU()
	}
	rss, rssErr := procPeakRSS(srv.PID)
	if rec != nil {
		if err := rec.stop(); err != nil {
			res.Failures = append(res.Failures, err.Error())
		}
	}

	var walls, firsts []time.Duration
	for i, t := range turns {
		if t.Err == nil {
			t.Err = c.verify(ctx, w, t)
		}
		if t.Err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("turn %d: %v", i+1, t.Err))
			continue
		}
		walls = append(walls, t.Wall)
		firsts = append(firsts, t.FirstEvent)
	}
	if w.Concurrent {
		res.Wall = shot
	} else {
		res.Wall = median(walls)
	}
	res.FirstEventP50, res.FirstEventP99 = percentile(firsts, 50), percentile(firsts, 99)
	if err := errors.Join(cpuErr, cpuErr1); err == nil {
		res.CPUPerTurn = (cpu1 - cpu0) / time.Duration(len(turns))
	} else {
		env.note("server CPU not measured: %v", err)
	}
	if err := errors.Join(swErr, swErr1); err == nil {
		res.SwitchesPerTurn = float64(sw1-sw0) / float64(len(turns))
	} else {
		env.note("server context switches not measured: %v", err)
	}
	if dbCPU != nil {
		if dbErr == nil {
			res.DBCPUPerTurn = cpuSince(db0, db1) / time.Duration(len(turns))
		} else {
			env.note("database CPU not measured: %v", dbErr)
		}
	}
	if rssErr == nil {
		res.PeakRSS = rss
	} else {
		env.note("server peak RSS not measured: %v", rssErr)
	}
	return res, nil
}
