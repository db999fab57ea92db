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
