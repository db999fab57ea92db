package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

func Example() {
	greet := tools.New(tools.Spec{Name: "greet", Description: "Greets someone.", Effect: tools.Idempotent},
		func(_ context.Context, _ tools.Call, args greetArgs) (tools.Result, error) {
			return tools.Result{Content: "Hello, " + args.Name + "!"}, nil
		})

	reg := tools.NewRegistry()
	if err := reg.Register(greet); err != nil {
		panic(err)
	}
	if err := reg.DefineSet("social", "greet*"); err != nil {
		panic(err)
	}
	available, err := reg.Resolve("social")
	if err != nil {
		panic(err)
	}

	rt, err := tools.NewRuntime(tools.RuntimeConfig{
		Recorder: tools.RecorderFunc(func(_ context.Context, e tools.Execution) error {
			fmt.Printf("recorded %s success=%v\n", e.ToolName, e.Success)
			return nil
		}),
		Parallelism: 1,
	})
	if err != nil {
		panic(err)
	}
	events := &event.Recorder{}
	emitter := event.NewEmitter(events, event.Source{Role: event.RolePlanner}, nil)
	out := rt.RunRound(context.Background(), available, []tools.Call{
		{ID: "call-1", Name: "greet", Args: json.RawMessage(`{"name": "Ada"}`), Events: emitter},
		{ID: "call-2", Name: "greet", Args: json.RawMessage(`{"nom": "Ada"}`), Events: emitter},
	})
	for _, o := range out {
		fmt.Println(o.Call.ID, o.Success, strings.ReplaceAll(o.Content, "\n", " | "))
	}
	fmt.Println(events.Types())
	// Output:
	// recorded greet success=true
	// recorded greet success=false
	// call-1 true Hello, Ada!
	// call-2 false error: tool "greet": invalid arguments (2 problems): | - /: additional properties 'nom' not allowed | - /: missing property 'name'
	// [tool_call tool_result tool_call tool_result]
}
