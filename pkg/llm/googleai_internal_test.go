package llm

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// A tool's JSON schema reaches the Gemini API as its Schema subset: keywords
// it does not know would make it refuse the request.
func TestGoogleParameters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, schema, want string
	}{
		{"keywords the API refuses are dropped", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,
			"properties":{"q":{"type":"string","minLength":1,"format":"uri"}},"required":["q","gone"]}`,
			`{"type":"OBJECT","properties":{"q":{"type":"STRING"}},"required":["q"]}`},
		{"nullable, enum, formats and arrays", `{"type":"object","properties":{
			"n":{"type":["integer","null"],"format":"int64","description":"a count"},
			"mode":{"enum":["a","b"]},
			"tags":{"type":"array","items":{"type":"string","format":"date-time"}},
			"any":{"type":"array"},
			"nested":{"type":"object","properties":{"x":{"type":"boolean"}}}}}`,
			`{"type":"OBJECT","properties":{
			"n":{"type":"INTEGER","format":"int64","description":"a count","nullable":true},
			"mode":{"type":"STRING","enum":["a","b"]},
			"tags":{"type":"ARRAY","items":{"type":"STRING","format":"date-time"}},
			"any":{"type":"ARRAY","items":{"type":"STRING"}},
			"nested":{"type":"OBJECT","properties":{"x":{"type":"BOOLEAN"}}}}}`},
		{"no properties: no parameters", `{"type":"object","properties":{}}`, `null`},
		{"not an object schema", `"nope"`, `null`},
	} {
		var params any
		require.NoError(t, json.Unmarshal([]byte(tc.schema), &params), tc.name)
		got, err := json.Marshal(googleParameters(params))
		require.NoError(t, err)
		require.JSONEq(t, tc.want, string(got), tc.name)
	}
}

func TestGoogleRequestOf(t *testing.T) {
	t.Parallel()
	msgs := []llms.MessageContent{
		{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextContent{Text: "one"}}},
		{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: ""}}},
		{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextContent{Text: "two"}}},
		{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextContent{Text: "hi"}}},
		{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.ToolCall{FunctionCall: &llms.FunctionCall{Name: "f", Arguments: `[1]`}}}},
	}
	opts := llms.CallOptions{Temperature: 0, TopP: -1, StopWords: []string{"END"}, JSONMode: true}
	req, err := googleRequestOf(msgs, &opts)
	require.NoError(t, err)
	got, err := json.Marshal(req)
	require.NoError(t, err)
	require.JSONEq(t, `{
		"systemInstruction":{"parts":[{"text":"one"},{"text":"two"}]},
		"contents":[{"role":"user","parts":[{"text":"hi"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{"value":[1]}}}]}],
		"generationConfig":{"candidateCount":1,"temperature":0,"stopSequences":["END"],"responseMimeType":"application/json"}}`, string(got),
		"system messages join; an empty message is left out; a temperature of 0 is sent; arguments are an object")

	_, err = googleRequestOf([]llms.MessageContent{{Role: llms.ChatMessageTypeFunction, Parts: []llms.ContentPart{llms.TextContent{Text: "x"}}}}, &opts)
	require.Error(t, err)
}
