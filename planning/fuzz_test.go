package planning_test

import (
	"encoding/json"
	"testing"

	"github.com/planwright/planwright/planning"
)

// FuzzValidate decodes arbitrary create_plan arguments and validates them:
// it must never panic, and a plan it accepts must be a valid DAG (every
// dependency an existing other step; at most MaxSteps steps, numbered from
// 1 to MaxSteps).
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		`{"goal":"g","steps":[{"number":1,"title":"a","executor_required":true}]}`,
		`{"goal":"g","steps":[{"id":1,"description":"a","executor_required":true,"depends_on":[2]},{"id":2,"description":"b","executor_required":true,"depends_on":[1]}]}`,
		`{"goal":"g","steps":[{"number":1,"title":"f","tool":"web_fetch","args":{"url":"{{steps.1.result}}"}}]}`,
		`{"steps":[]}`, `{}`, `[]`, `{"goal":"","steps":[{"number":-1}]}`,
	} {
		f.Add([]byte(seed))
	}
	cfg := planning.ValidateConfig{MaxSteps: 6, Tool: allowed("web_fetch", "create_task")}
	f.Fuzz(func(t *testing.T, data []byte) {
		var args planning.CreatePlanArgs
		if json.Unmarshal(data, &args) != nil {
			return
		}
		steps := planning.StepsFrom(args.Steps)
		if planning.Validate(planning.Plan{Goal: args.Goal, Steps: steps}, cfg) != nil {
			return
		}
		numbers := map[int]bool{}
		for _, s := range steps {
			if s.Number < 1 || s.Number > 6 {
				t.Fatalf("accepted step number %d outside 1…6", s.Number)
			}
			numbers[s.Number] = true
		}
		if len(steps) == 0 || len(steps) > 6 || len(numbers) != len(steps) {
			t.Fatalf("accepted a plan with %d steps (%d distinct)", len(steps), len(numbers))
		}
		for _, s := range steps {
			for _, d := range s.DependsOn {
				if d == s.Number || !numbers[d] {
					t.Fatalf("accepted step %d depending on %d", s.Number, d)
				}
			}
		}
	})
}

// FuzzReviseUnfinished decodes arbitrary revise_plan arguments and applies
// them to a running plan: it must never panic, and a revision it accepts
// keeps every completed and running step exactly as it stood.
func FuzzReviseUnfinished(f *testing.F) {
	for _, seed := range []string{
		`{"steps":[{"number":5,"title":"again","executor_required":true,"depends_on":[1]},{"number":4,"title":"w","executor_required":true,"depends_on":[5]}]}`,
		`{"steps":[{"number":1,"title":"changed","executor_required":true}]}`,
		`{"steps":[{"number":3,"title":"x","executor_required":true}],"remove":[2,1]}`,
		`{"remove":[4]}`, `{}`, `{"steps":[{"number":6,"depends_on":[6]}]}`,
	} {
		f.Add([]byte(seed))
	}
	done, running := exec(1), exec(2, 1)
	done.Status, done.Result = planning.StepCompleted, "r"
	running.Status = planning.StepRunning
	failed := exec(3, 1)
	failed.Status = planning.StepFailed
	current := []planning.Step{done, running, failed, exec(4, 3)}
	cfg := planning.ValidateConfig{MaxSteps: 6, Tool: allowed("web_fetch", "create_task")}
	f.Fuzz(func(t *testing.T, data []byte) {
		var args planning.RevisePlanArgs
		if json.Unmarshal(data, &args) != nil {
			return
		}
		got, err := planning.ReviseUnfinished("g", current, planning.ReplanScope{Failed: map[int]bool{3: true}},
			planning.ReplanRevision{Steps: planning.StepsFrom(args.Steps), Remove: args.Remove}, cfg)
		if err != nil {
			return
		}
		kept := map[int]planning.Step{}
		for _, s := range got {
			kept[s.Number] = s
		}
		for _, want := range []planning.Step{done, running} {
			s, ok := kept[want.Number]
			if !ok || s.Status != want.Status || s.Result != want.Result || s.Title != want.Title || len(s.DependsOn) != len(want.DependsOn) {
				t.Fatalf("an accepted revision changed step %d: %+v", want.Number, s)
			}
		}
	})
}
