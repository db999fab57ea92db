package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/llmtest"
)

// jsonOf re-encodes part of a decoded request body, for JSONEq.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// What the Gemini API receives of a turn: the system message as the
// systemInstruction, the assistant's text and calls as one "model" content,
// the turn's results as one "user" content of functionResponses by name,
// the tools as functionDeclarations in the API's schema, the options that
// are set, the key in its header and the model in the path.
func TestGoogleAIReceivesTheTurnWhole(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		h := newHarness(t, "googleai", stream, 5*time.Second, llmtest.Reply{Chunks: []string{"done"}})
		temp := 0.2
		_, err := h.client.Generate(context.Background(), llm.Request{Messages: twoCalls(), Tools: []llm.ToolDef{searchTool, mcpTool},
			Temperature: &temp, MaxTokens: 100}, nil)
		require.NoError(t, err)
		body := h.peer.Body(t, 0)
		require.JSONEq(t, `{"parts":[{"text":"sys"}]}`, jsonOf(t, body["systemInstruction"]))
		require.JSONEq(t, `[
			{"role":"user","parts":[{"text":"hi"}]},
			{"role":"model","parts":[
				{"text":"Checking two things."},
				{"functionCall":{"name":"search","args":{"q":"one"}}},
				{"functionCall":{"name":"files__read","args":{"path":"two"}}}]},
			{"role":"user","parts":[
				{"functionResponse":{"name":"search","response":{"response":"result one"}}},
				{"functionResponse":{"name":"files__read","response":{"response":"result two"}}}]}
		]`, jsonOf(t, body["contents"]))
		require.JSONEq(t, `[{"functionDeclarations":[
			{"name":"search","description":"search","parameters":{"type":"OBJECT","properties":{"q":{"type":"STRING"}}}},
			{"name":"files__read","description":"read a file"}]}]`, jsonOf(t, body["tools"]),
			"an object without properties is a function without parameters")
		require.JSONEq(t, `{"candidateCount":1,"maxOutputTokens":100,"temperature":0.2}`, jsonOf(t, body["generationConfig"]))
		require.Equal(t, googleKey, h.peer.Header(0).Get("x-goog-api-key"))
		want := "/v1beta/models/scripted-model:generateContent"
		if stream {
			want = "/v1beta/models/scripted-model:streamGenerateContent?alt=sse"
		}
		require.Equal(t, want, h.peer.RequestURL(0))
	}
}

// A call Gemini makes comes back with an id (the API sends none) and its
// arguments; its result goes back as a functionResponse of the same name,
// and the next answer is text.
func TestGoogleAIToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{true, false} {
		h := newHarness(t, "googleai", stream, 5*time.Second,
			llmtest.Reply{Calls: []llmtest.Call{{Name: "files__read", Args: `{"path":"a.txt","lines":[1,2]}`}, {Name: "search", Args: `{}`}},
				InputTokens: 30, OutputTokens: 12},
			llmtest.Reply{Chunks: []string{"It says ", "hello."}, InputTokens: 50, OutputTokens: 4})
		req := llm.Request{Messages: userAsks("read a.txt"), Tools: []llm.ToolDef{searchTool, mcpTool}}
		var p parts
		resp, err := h.client.Generate(context.Background(), req, p.on)
		require.NoError(t, err)
		require.Empty(t, resp.Text)
		require.Len(t, resp.ToolCalls, 2)
		require.Equal(t, "files.read", resp.ToolCalls[0].Name)
		require.JSONEq(t, `{"path":"a.txt","lines":[1,2]}`, string(resp.ToolCalls[0].Arguments))
		require.Equal(t, "search", resp.ToolCalls[1].Name)
		require.JSONEq(t, `{}`, string(resp.ToolCalls[1].Arguments))
		require.NotEmpty(t, resp.ToolCalls[0].ID)
		require.NotEqual(t, resp.ToolCalls[0].ID, resp.ToolCalls[1].ID)
		require.Equal(t, resp.ToolCalls, p.calls)
		require.Equal(t, 30, resp.Usage.InputTokens)
		require.Equal(t, 12, resp.Usage.OutputTokens)

		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: resp.ToolCalls},
			llm.Message{Role: llm.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Name: "files.read", Content: "hello"},
			llm.Message{Role: llm.RoleTool, ToolCallID: resp.ToolCalls[1].ID, Name: "search", Content: "nothing"})
		p = parts{}
		resp, err = h.client.Generate(context.Background(), req, p.on)
		require.NoError(t, err)
		require.Equal(t, "It says hello.", resp.Text)
		require.Equal(t, "It says hello.", p.text.String())
		require.Empty(t, resp.ToolCalls)
		require.Equal(t, "STOP", resp.StopReason)
		require.JSONEq(t, `[
			{"role":"user","parts":[{"text":"read a.txt"}]},
			{"role":"model","parts":[
				{"functionCall":{"name":"files__read","args":{"path":"a.txt","lines":[1,2]}}},
				{"functionCall":{"name":"search","args":{}}}]},
			{"role":"user","parts":[
				{"functionResponse":{"name":"files__read","response":{"response":"hello"}}},
				{"functionResponse":{"name":"search","response":{"response":"nothing"}}}]}
		]`, jsonOf(t, h.peer.Body(t, 1)["contents"]))
	}
}

// Text reaches onPart chunk by chunk, as the stream delivers it.
func TestGoogleAIStreamsDeltas(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "googleai", true, 5*time.Second, llmtest.Reply{Chunks: []string{"one ", "two ", "three"}, InputTokens: 3, OutputTokens: 3})
	var deltas []string
	resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("count")}, func(p llm.Part) {
		if d, ok := p.(llm.TextDelta); ok {
			deltas = append(deltas, d.Text)
		}
	})
	require.NoError(t, err)
	require.Equal(t, []string{"one ", "two ", "three"}, deltas)
	require.Equal(t, "one two three", resp.Text)
}

// Without llm.model the model langchaingo's googleai provider used is
// called (README says so), at the API's path.
func TestGoogleAIDefaultModel(t *testing.T) {
	t.Parallel()
	peer := llmtest.Gemini(t, llmtest.Reply{Chunks: []string{"ok"}})
	model, err := llm.NewProvider(context.Background(), llm.ProviderConfig{Provider: "googleai", BaseURL: peer.URL + "/",
		GoogleAPIKey: googleKey, HTTPClient: peer.Client()})
	require.NoError(t, err)
	client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "googleai"})
	require.NoError(t, err)
	_, err = client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
	require.NoError(t, err)
	require.Equal(t, "/v1beta/models/gemini-2.0-flash:generateContent", peer.RequestURL(0))
}

// An error answer names the status and the address called, never the key,
// even when the server echoes it.
func TestGoogleAIErrorsNeverShowTheKey(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"code":400,"message":"API key not valid: %s","status":"INVALID_ARGUMENT"}}`, r.Header.Get("x-goog-api-key"))
	}))
	t.Cleanup(srv.Close)
	model, err := llm.NewProvider(context.Background(), llm.ProviderConfig{Provider: "googleai", Model: "m", BaseURL: srv.URL,
		GoogleAPIKey: "very-secret-key", HTTPClient: srv.Client()})
	require.NoError(t, err)
	client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "googleai", Stream: true})
	require.NoError(t, err)
	_, err = client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
	require.Error(t, err)
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	require.Contains(t, apperr.MessageOf(err), "HTTP 400")
	require.Contains(t, apperr.MessageOf(err), "POST "+srv.URL+"/v1beta/models/m:streamGenerateContent")
	require.Contains(t, err.Error(), "INVALID_ARGUMENT: API key not valid")
	require.NotContains(t, err.Error(), "very-secret-key")
	var pe *llm.ProviderError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 400, pe.Status)
	require.Equal(t, 1, pe.Attempts, "a 400 is not retried")
}

// A thinking model's thoughtSignature on a functionCall part comes back on
// that call (Signature) and goes back, unchanged, on the same part of the
// next request; a call the API gave no signature goes without one.
func TestGoogleAIThoughtSignatureGoesBackOnItsCall(t *testing.T) {
	t.Parallel()
	const sig = "Q2lZQnlqbGZRZ3Y0eWw5c2lnbmF0dXJl"
	for _, stream := range []bool{true, false} {
		h := newHarness(t, "googleai", stream, 5*time.Second,
			llmtest.Reply{Calls: []llmtest.Call{{Name: "files__read", Args: `{"path":"a.txt"}`, Signature: sig}, {Name: "search", Args: `{"q":"x"}`}}},
			llmtest.Reply{Chunks: []string{"done"}})
		req := llm.Request{Messages: userAsks("read a.txt"), Tools: []llm.ToolDef{searchTool, mcpTool}}
		var p parts
		resp, err := h.client.Generate(context.Background(), req, p.on)
		require.NoError(t, err)
		require.Len(t, resp.ToolCalls, 2)
		require.Equal(t, sig, resp.ToolCalls[0].Signature)
		require.Empty(t, resp.ToolCalls[1].Signature)
		require.Equal(t, resp.ToolCalls, p.calls, "the ToolCallParts carry it too")

		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: "Reading.", ToolCalls: resp.ToolCalls},
			llm.Message{Role: llm.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Name: "files.read", Content: "hello"},
			llm.Message{Role: llm.RoleTool, ToolCallID: resp.ToolCalls[1].ID, Name: "search", Content: "nothing"})
		_, err = h.client.Generate(context.Background(), req, nil)
		require.NoError(t, err)
		contents, _ := h.peer.Body(t, 1)["contents"].([]any)
		require.Len(t, contents, 3)
		require.JSONEq(t, `{"role":"model","parts":[
			{"text":"Reading."},
			{"functionCall":{"name":"files__read","args":{"path":"a.txt"}},"thoughtSignature":"`+sig+`"},
			{"functionCall":{"name":"search","args":{"q":"x"}}}]}`, jsonOf(t, contents[1]))
	}
}

// Other providers never send a signature (it is Gemini's).
func TestSignatureIsGoogleAIsOnly(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"openai", "anthropic"} {
		h := newHarness(t, provider, true, 5*time.Second, llmtest.Reply{Chunks: []string{"done"}})
		msgs := twoCalls()
		msgs[2].ToolCalls[0].Signature = "c2lnbmF0dXJl"
		_, err := h.client.Generate(context.Background(), llm.Request{Messages: msgs, Tools: []llm.ToolDef{searchTool, mcpTool}}, nil)
		require.NoError(t, err, provider)
		require.NotContains(t, string(h.peer.Bodies()[0]), "c2lnbmF0dXJl", provider)
		require.Contains(t, string(h.peer.Bodies()[0]), "result one", provider)
	}
}
