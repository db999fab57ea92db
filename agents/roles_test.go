package agents_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

func TestShippedRolesFile(t *testing.T) {
	t.Parallel()
	rs, err := agents.LoadRoles(filepath.Join("..", "configs", "agents.yaml"))
	require.NoError(t, err)

	require.Equal(t, event.RolePlanner, rs.Planner.Name)
	require.Equal(t, 15, rs.Planner.Limits.MaxToolCalls)
	require.Equal(t, 5000, rs.Planner.Limits.TokenBudget)
	require.Equal(t, 90*time.Second, rs.Planner.Limits.TimeLimit)
	require.Equal(t, 2, rs.Planner.Limits.MaxConsecutiveFailures)
	require.Equal(t, []string{"workspace"}, rs.Planner.ToolSets)
	require.Equal(t, 1500, rs.Executor.Limits.TokenBudget)
	require.Equal(t, 2000, rs.Reviewer.Limits.TokenBudget)
	require.Equal(t, 15, rs.Executor.Limits.MaxToolCalls)
	require.Equal(t, 90*time.Second, rs.Executor.Limits.TimeLimit)
	require.Equal(t, agents.DefaultHistoryPolicy(), rs.Executor.History)

	for _, name := range []event.Role{event.RolePlanner, event.RoleExecutor, event.RoleReviewer, event.RoleSynthesizer} {
		r, err := rs.Get(name)
		require.NoError(t, err)
		require.Equal(t, name, r.Name)
		for _, data := range []agents.PromptData{{}, fullData()} {
			out, err := r.Prompt.Render(data)
			require.NoError(t, err, "role %s", name)
			require.NotContains(t, out, "<no value>", "role %s", name)
		}
	}
	_, err = rs.Get("janitor")
	require.ErrorIs(t, err, apperr.ErrNotFound)

	planner, err := rs.Planner.Prompt.Render(fullData())
	require.NoError(t, err)
	require.Contains(t, planner, "create_plan")
	require.Contains(t, planner, `"{{steps.N.result}}"`, "literal braces survive the template")
	require.Contains(t, planner, "Today is 2026-05-06")
	require.Contains(t, planner, "Be brief.")
	executor, err := rs.Executor.Prompt.Render(fullData())
	require.NoError(t, err)
	require.Contains(t, executor, "Your task: Draft the announcement")
	require.Contains(t, executor, "Step 1 (Research): Found three competitors.")
	require.Contains(t, executor, "Tools you can use: list_tasks, create_task.")
	reviewer, err := rs.Reviewer.Prompt.Render(fullData())
	require.NoError(t, err)
	require.Contains(t, reviewer, "submit_review")
}

func fullData() agents.PromptData {
	return agents.PromptData{
		Date: "2026-05-06", ContextType: "project", EntityID: "p1", EntityName: "Launch",
		Goal: "Launch the product", Task: "Draft the announcement", StepNumber: 2, StepTitle: "Draft",
		Tools:        []string{"list_tasks", "create_task"},
		Dependencies: []agents.Dependency{{Number: 1, Title: "Research", Result: "Found three competitors."}},
		Instructions: "Be brief.",
	}
}

const validRoles = `
roles:
  planner:
    prompt: "Plan. Today is {{.Date}}."
  executor:
    prompt: "Do {{.Task}}."
    max_tool_calls: 4
    time_limit: 30s
    approval: side_effects
  reviewer:
    prompt: "Review {{.Goal}}."
    tools: [review]
  synthesizer:
    prompt: "Write the answer."
    model: big-model
    temperature: 0.7
    history: {window: 6, compress_after: 4}
`

func TestParseRolesAppliesDefaults(t *testing.T) {
	t.Parallel()
	rs, err := agents.ParseRoles([]byte(validRoles))
	require.NoError(t, err)
	require.Equal(t, agents.DefaultLimits(event.RolePlanner), rs.Planner.Limits)
	require.Equal(t, 4, rs.Executor.Limits.MaxToolCalls)
	require.Equal(t, tools.ApproveSideEffects, rs.Executor.Approval)
	require.Empty(t, rs.Planner.Approval, "no approval said: the narrower rules, else never")
	require.Equal(t, 30*time.Second, rs.Executor.Limits.TimeLimit)
	require.Equal(t, 1500, rs.Executor.Limits.TokenBudget)
	require.Equal(t, 2, rs.Executor.Limits.MaxConsecutiveFailures)
	require.Equal(t, []string{"review"}, rs.Reviewer.ToolSets)
	require.Equal(t, "big-model", rs.Synthesizer.Model)
	require.Equal(t, 0.7, *rs.Synthesizer.Temperature)
	require.Nil(t, rs.Planner.Temperature)
	require.Equal(t, agents.HistoryPolicy{Window: 6, CompressAfter: 4, SummaryChars: 420, MessageChars: 1200}, rs.Synthesizer.History)
}

func TestParseRolesNamesTheBadField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		edit   func(string) string
		fields []string
	}{
		{"missing role", func(s string) string {
			return strings.Replace(s, "  reviewer:\n    prompt: \"Review {{.Goal}}.\"\n    tools: [review]\n", "", 1)
		},
			[]string{"roles.reviewer"}},
		{"unknown role", func(s string) string { return s + "  janitor:\n    prompt: hi\n" }, []string{"roles.janitor"}},
		{"missing prompt", func(s string) string { return strings.Replace(s, `prompt: "Write the answer."`, `max_rounds: 1`, 1) },
			[]string{"roles.synthesizer.prompt"}},
		{"empty prompt", func(s string) string { return strings.Replace(s, `"Write the answer."`, `"  "`, 1) }, []string{"roles.synthesizer.prompt"}},
		{"unknown template field", func(s string) string { return strings.Replace(s, "{{.Task}}", "{{.Taks}}", 1) }, []string{"roles.executor.prompt"}},
		{"unknown field in a branch not taken", func(s string) string {
			return strings.Replace(s, "{{.Task}}", "{{if .Task}}{{.Task}}{{else}}{{.Chore}}{{end}}", 1)
		}, []string{"roles.executor.prompt"}},
		{"unknown field inside range", func(s string) string {
			return strings.Replace(s, "{{.Task}}", "{{range .Dependencies}}{{.Output}}{{end}}", 1)
		}, []string{"roles.executor.prompt"}},
		{"unknown field through $", func(s string) string {
			return strings.Replace(s, "{{.Task}}", "{{range .Tools}}{{$.Tsk}}{{end}}", 1)
		}, []string{"roles.executor.prompt"}},
		{"template syntax", func(s string) string { return strings.Replace(s, "{{.Task}}", "{{.Task", 1) }, []string{"roles.executor.prompt"}},
		{"zero tool calls", func(s string) string { return strings.Replace(s, "max_tool_calls: 4", "max_tool_calls: 0", 1) },
			[]string{"roles.executor.max_tool_calls"}},
		{"bad duration", func(s string) string { return strings.Replace(s, "time_limit: 30s", "time_limit: soon", 1) },
			[]string{"roles.executor.time_limit"}},
		{"negative duration", func(s string) string { return strings.Replace(s, "time_limit: 30s", "time_limit: -3s", 1) },
			[]string{"roles.executor.time_limit"}},
		{"temperature", func(s string) string { return strings.Replace(s, "temperature: 0.7", "temperature: 3", 1) },
			[]string{"roles.synthesizer.temperature"}},
		{"duplicate tool set", func(s string) string { return strings.Replace(s, "[review]", "[review, review]", 1) },
			[]string{"roles.reviewer.tools[1]"}},
		{"approval policy", func(s string) string { return strings.Replace(s, "approval: side_effects", "approval: sometimes", 1) },
			[]string{"roles.executor.approval"}},
		{"history window", func(s string) string { return strings.Replace(s, "window: 6", "window: -1", 1) },
			[]string{"roles.synthesizer.history.window"}},
		{"every problem at once", func(s string) string {
			s = strings.Replace(s, "max_tool_calls: 4", "max_tool_calls: 0", 1)
			return strings.Replace(s, "temperature: 0.7", "temperature: -1", 1)
		}, []string{"roles.executor.max_tool_calls", "roles.synthesizer.temperature"}},
		{"unknown key", func(s string) string { return strings.Replace(s, "max_tool_calls: 4", "max_tools: 4", 1) }, nil},
		{"empty file", func(string) string { return "" }, []string{"roles"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := agents.ParseRoles([]byte(tc.edit(validRoles)))
			require.Error(t, err)
			require.ErrorIs(t, err, apperr.ErrInvalid)
			var got []string
			for _, f := range apperr.FieldsOf(err) {
				got = append(got, f.Field)
			}
			require.Equal(t, tc.fields, got, err.Error())
		})
	}
}

func TestLoadRolesErrors(t *testing.T) {
	t.Parallel()
	_, err := agents.LoadRoles(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(t.TempDir(), "agents.yaml")
	require.NoError(t, os.WriteFile(path, []byte("roles: {planner: {prompt: x}}"), 0o600))
	_, err = agents.LoadRoles(path)
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "roles.executor: is required")
}

func TestParsePrompt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		text    string
		wantErr string
	}{
		{"plain", "Hello.", ""},
		{"fields", "{{.Date}} {{.ContextType}} {{.StepNumber}} {{.Instructions}}", ""},
		{"with", "{{with .Goal}}Goal: {{.}}{{end}}", ""},
		{"range with variables", "{{range $i, $d := .Dependencies}}{{$i}}{{$d.Title}}{{.Result}}{{end}}", ""},
		{"join", `{{join .Tools ", "}}`, ""},
		{"unknown", "{{.Mood}}", `unknown field "Mood"`},
		{"field of a string", "{{.Goal.Length}}", "has no field Length"},
		{"unknown function", "{{shout .Goal}}", `function "shout" not defined`},
		{"bad call at run", "{{join .Goal}}", "wrong number of args"},
		{"empty", " \n", "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := agents.ParsePrompt("test", tc.text)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.text, p.Text())
			_, err = p.Render(agents.PromptData{})
			require.NoError(t, err)
		})
	}
}

// The replanner is optional: without it in the file it gets its default
// prompt and the planner's model; the shipped file configures it, with
// its own prompt and budget.
func TestReplannerRole(t *testing.T) {
	t.Parallel()
	withModel := strings.Replace(validRoles, "  planner:\n", "  planner:\n    model: plan-model\n", 1)
	require.NotEqual(t, validRoles, withModel)
	rs, err := agents.ParseRoles([]byte(withModel))
	require.NoError(t, err)
	r, err := rs.Get(event.RoleReplanner)
	require.NoError(t, err)
	require.Equal(t, event.RoleReplanner, r.Name)
	require.Equal(t, "plan-model", r.Model, "the planner's model by default")
	out, err := r.Prompt.Render(agents.PromptData{Goal: "Price report"})
	require.NoError(t, err)
	require.Contains(t, out, "You are the replanner of planwright")
	require.Contains(t, out, "revise_plan")

	shipped, err := agents.LoadRoles(filepath.Join("..", "configs", "agents.yaml"))
	require.NoError(t, err)
	require.Equal(t, 5000, shipped.Replanner.Limits.TokenBudget)
	require.Equal(t, shipped.Planner.Model, shipped.Replanner.Model)
	out, err = shipped.Replanner.Prompt.Render(fullData())
	require.NoError(t, err)
	require.Contains(t, out, "revise_plan")
}
