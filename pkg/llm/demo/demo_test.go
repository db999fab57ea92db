package demo_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/demo"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []demo.Part
	}{
		{"1. draft the post\n2. pick a date\n3. invite the team", []demo.Part{{"draft the post", nil}, {"pick a date", nil}, {"invite the team", nil}}},
		{"- a\n- b", []demo.Part{{"a", nil}, {"b", nil}}},
		{"write the blog post and design the banner", []demo.Part{{"write the blog post", nil}, {"design the banner", nil}}},
		{"draft the copy, then publish it", []demo.Part{{"draft the copy", nil}, {"publish it", []int{0}}}},
		{"research competitors and list features then write a summary",
			[]demo.Part{{"research competitors", nil}, {"list features", nil}, {"write a summary", []int{0, 1}}}},
		{"just one thing", []demo.Part{{"just one thing", nil}}},
	} {
		require.Equal(t, tc.want, demo.Split(tc.in), tc.in)
	}
}

func client(t *testing.T) *llm.Client {
	t.Helper()
	c, err := llm.NewClient(llm.ClientConfig{Model: demo.New(), Provider: "demo", Stream: true})
	require.NoError(t, err)
	return c
}

func tool(name string) llm.ToolDef {
	return llm.ToolDef{Name: name, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func TestRoles(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := context.Background()
	ask := func(role string, msgs []llm.Message, tools ...string) llm.Response {
		req := llm.Request{Role: role, Messages: append([]llm.Message{{Role: llm.RoleSystem, Content: "sys"}}, msgs...)}
		for _, n := range tools {
			req.Tools = append(req.Tools, tool(n))
		}
		resp, err := c.Generate(ctx, req, nil)
		require.NoError(t, err)
		return resp
	}
	user := func(s string) []llm.Message { return []llm.Message{{Role: llm.RoleUser, Content: s}} }

	plan := ask("planner", user("draft the copy and pick channels, then schedule it"), "create_plan", "create_task", "create_document")
	require.Len(t, plan.ToolCalls, 1)
	var args struct {
		Steps []struct {
			Number    int      `json:"number"`
			Tools     []string `json:"tools"`
			DependsOn []int    `json:"depends_on"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(plan.ToolCalls[0].Arguments, &args))
	require.Len(t, args.Steps, 3)
	require.Empty(t, args.Steps[1].DependsOn)
	require.Equal(t, []int{1, 2}, args.Steps[2].DependsOn, `"then" waits for every clause before it`)
	require.Equal(t, []string{"create_document", "create_task"}, args.Steps[0].Tools)
	require.True(t, strings.HasPrefix(plan.Text, demo.Label))

	single := ask("planner", user("hello"), "create_plan")
	require.Empty(t, single.ToolCalls)
	require.Contains(t, single.Text, demo.Label)
	noTool := ask("planner", user("a and b"))
	require.Empty(t, noTool.ToolCalls, "the demo never calls a tool it is not offered")

	after := ask("planner", []llm.Message{{Role: llm.RoleUser, Content: "a and b"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "1", Name: "create_plan", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "1", Name: "create_plan", Content: "Plan is completed: 2 of 2 steps completed."}}, "create_plan")
	require.Contains(t, after.Text, "2 of 2 steps completed")

	task := "Plan goal: x\n\nYour step (1): Draft the copy\nTask: draft the copy\n"
	exec := ask("executor", user(task), "create_document")
	require.Equal(t, "create_document", exec.ToolCalls[0].Name)
	require.Contains(t, string(exec.ToolCalls[0].Arguments), "Draft the copy")
	plain := ask("executor", user(task))
	require.Contains(t, plain.Text, "Done: Draft the copy")

	review := ask("reviewer", user("Review this plan"), "submit_review")
	require.Contains(t, string(review.ToolCalls[0].Arguments), "approved")

	// Deterministic: the same request gives the same plan.
	again := ask("planner", user("draft the copy and pick channels, then schedule it"), "create_plan", "create_task", "create_document")
	require.JSONEq(t, string(plan.ToolCalls[0].Arguments), string(again.ToolCalls[0].Arguments))
}
