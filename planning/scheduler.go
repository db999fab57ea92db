package planning

import "fmt"

// The scheduler is the plan's dependency rule as a pure state machine: given
// the steps and their states it says which steps start, which are skipped,
// which are cancelled and how the plan ends. It touches no database and
// starts no goroutine; the run of a plan (planRun.drive, run.go) drives it,
// running what it starts and feeding back how each step ended.

// Skip is a pending step that can no longer run, and why.
type Skip struct {
	Number int
	Reason string
}

// Next is what the scheduler says to do now.
type Next struct {
	// Skip lists the pending steps one of whose dependencies did not
	// complete, dependents of skipped steps included, in plan order.
	Skip []Skip
	// Start lists the pending steps whose dependencies all completed, in
	// plan order, as many as the parallelism limit leaves room for.
	Start []int
	// Done says nothing runs and nothing can start: the plan's run is over
	// (see Unfinished and Outcome).
	Done bool
}

// Schedule decides the next move for steps in their current states: at
// most limit steps run at once (running steps count); once the plan is
// cancelled nothing starts and nothing is skipped — what waits is
// cancelled when the run ends (Unfinished). steps must be a valid plan
// (Validate): numbers unique, dependencies known, no cycle.
func Schedule(steps []Step, limit int, cancelled bool) Next {
	return ScheduleReplanning(steps, limit, cancelled, nil)
}

// ScheduleReplanning is Schedule while the failed steps in replanning wait
// for a revision of what is left (replan.go): their dependents are not
// skipped — they wait, pending, for the revision to replace or remove them
// — while every other step is scheduled as usual.
func ScheduleReplanning(steps []Step, limit int, cancelled bool, replanning map[int]bool) Next {
	status := make(map[int]StepStatus, len(steps))
	running := 0
	for _, s := range steps {
		status[s.Number] = s.Status
		if s.Status == StepRunning {
			running++
		}
	}
	var next Next
	// A skip can make a later step skippable and an earlier one too (plan
	// order need not follow dependencies): repeat until nothing changes.
	for changed := true; changed && !cancelled; {
		changed = false
		for _, s := range steps {
			if status[s.Number] != StepPending {
				continue
			}
			if d, ok := failedDependency(s, status, replanning); ok {
				status[s.Number] = StepSkipped
				next.Skip = append(next.Skip, Skip{Number: s.Number,
					Reason: fmt.Sprintf("skipped: step %d did not complete (%s)", d, status[d])})
				changed = true
			}
		}
	}
	if !cancelled {
		for _, s := range steps {
			if running >= limit {
				break
			}
			if status[s.Number] == StepPending && ready(s, status) {
				status[s.Number] = StepRunning
				next.Start = append(next.Start, s.Number)
				running++
			}
		}
	}
	next.Done = running == 0
	return next
}

// failedDependency returns the first dependency of s (in its order) that
// ended without completing and is not being replanned.
func failedDependency(s Step, status map[int]StepStatus, replanning map[int]bool) (int, bool) {
	for _, d := range s.DependsOn {
		if replanning[d] {
			continue
		}
		switch status[d] {
		case StepFailed, StepSkipped, StepCancelled:
			return d, true
		}
	}
	return 0, false
}

func ready(s Step, status map[int]StepStatus) bool {
	for _, d := range s.DependsOn {
		if status[d] != StepCompleted {
			return false
		}
	}
	return true
}

// Unfinished lists the steps a run that is over left pending or running, in
// plan order: they are cancelled.
func Unfinished(steps []Step) []int {
	var out []int
	for _, s := range steps {
		if s.Status == StepPending || s.Status == StepRunning {
			out = append(out, s.Number)
		}
	}
	return out
}

// Outcome is how a plan whose run is over ended, from its steps' final
// states: completed when every step completed; otherwise interrupted when
// the service shut down (to be resumed), cancelled when the plan was
// cancelled, failed when it was not.
func Outcome(steps []Step, cancelled, shutdown bool) Status {
	completed := 0
	for _, s := range steps {
		if s.Status == StepCompleted {
			completed++
		}
	}
	switch {
	case completed == len(steps):
		return StatusCompleted
	case shutdown:
		return StatusInterrupted
	case cancelled:
		return StatusCancelled
	}
	return StatusFailed
}
