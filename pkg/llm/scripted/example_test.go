package scripted_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/scripted"
)

func Example() {
	m, err := scripted.Parse([]byte(`
rules:
  - when: {role: planner, after_tool: none}
    reply:
      text: "Searching."
      tool_calls: [{name: search_workspace, args: {query: launch}}]
  - when: {role: planner, after_tool: search_workspace}
    reply: {text: "Found it."}
`))
	if err != nil {
		panic(err)
	}
	ctx := llm.WithRole(context.Background(), "planner")
	tools := llms.WithTools([]llms.Tool{{Type: "function", Function: &llms.FunctionDefinition{Name: "search_workspace"}}})

	resp, _ := m.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "find the launch")}, tools,
		llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
			fmt.Printf("streamed %q\n", chunk)
			return nil
		}))
	call := resp.Choices[0].ToolCalls[0]
	fmt.Println(call.ID, call.FunctionCall.Name, call.FunctionCall.Arguments, resp.Choices[0].StopReason)

	resp, _ = m.GenerateContent(ctx, []llms.MessageContent{{Role: llms.ChatMessageTypeTool,
		Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: call.ID, Name: "search_workspace", Content: "1 hit"}}}}, tools)
	fmt.Println(resp.Choices[0].Content)
	for _, c := range m.Calls() {
		fmt.Printf("rule %d after %q\n", c.Rule, c.AfterTool)
	}
	// Output:
	// streamed "Searchin"
	// streamed "g."
	// call_1 search_workspace {"query":"launch"} tool_calls
	// Found it.
	// rule 0 after ""
	// rule 1 after "search_workspace"
}
