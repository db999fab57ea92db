package llm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/llmtest"
)

// A stream cut before its end (no finish_reason / [DONE], no message_stop,
// no finishReason)
// or carrying a chunk that is not JSON is a provider error, never a
// complete answer; a cut tool call is never handed on. It is retried while
// no text reached the user.
func TestBrokenStreamsAreProviderErrors(t *testing.T) {
	t.Parallel()
	call := llmtest.Call{ID: "c1", Name: "search", Args: `{"q":"a long query"}`}
	for _, provider := range providers {
		for _, tc := range []struct {
			name  string
			first llmtest.Reply
			// shown is the text the user saw of the first attempt; retried
			// says a second attempt answered.
			shown   string
			retried bool
		}{
			{"cut mid-token after text", llmtest.Reply{Chunks: []string{"Hello ", "there"}, Fault: llmtest.CutMidText}, "Hello there", false},
			{"cut mid-tool-call before text", llmtest.Reply{Calls: []llmtest.Call{call}, Fault: llmtest.CutMidToolCall}, "", true},
			{"cut mid-tool-call after text", llmtest.Reply{Chunks: []string{"Looking."}, Calls: []llmtest.Call{call}, Fault: llmtest.CutMidToolCall}, "Looking.", false},
			{"malformed chunk after text", llmtest.Reply{Chunks: []string{"Hello"}, Fault: llmtest.MalformedChunk}, "Hello", false},
		} {
			t.Run(provider+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, provider, true, 5*time.Second, tc.first, llmtest.Reply{Chunks: []string{"fine"}, InputTokens: 3, OutputTokens: 1})
				var p parts
				resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi"), Tools: []llm.ToolDef{searchTool}}, p.on)
				if tc.retried {
					require.NoError(t, err)
					require.Equal(t, "fine", resp.Text)
					require.Equal(t, "fine", p.text.String())
					require.Empty(t, p.calls, "the cut call is not handed on")
					require.Equal(t, 2, h.peer.Requests())
					return
				}
				require.Error(t, err)
				require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
				require.Contains(t, apperr.MessageOf(err), "stream")
				var pe *llm.ProviderError
				require.True(t, errors.As(err, &pe), "%v", err)
				require.Equal(t, llm.CauseProviderError, pe.Cause())
				require.Equal(t, tc.shown, resp.Text, "the partial text is returned")
				require.Equal(t, tc.shown, p.text.String(), "nothing of the broken line reached the user")
				require.Empty(t, resp.ToolCalls)
				require.Empty(t, p.calls, "a cut tool call is never dispatched")
				require.Zero(t, p.stops, "no StopPart: the answer did not end")
				require.Equal(t, 1, h.peer.Requests(), "nothing is retried once text reached the user")
			})
		}
	}
}

// A malformed chunk before any text is retried like any provider failure.
func TestMalformedChunkBeforeTextIsRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "openai", true, 5*time.Second, llmtest.Reply{Fault: llmtest.MalformedChunk}, llmtest.Reply{Chunks: []string{"fine"}})
	resp, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
	require.NoError(t, err)
	require.Equal(t, "fine", resp.Text)
	require.Equal(t, 2, h.peer.Requests())
}

// A stall or an attempt timeout is a provider error whose cause says so.
func TestStallCauseIsProviderTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "openai", true, 200*time.Millisecond, llmtest.Reply{Chunks: []string{"partial"}, Stall: true})
	_, err := h.client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
	var pe *llm.ProviderError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, llm.CauseProviderTimeout, pe.Cause())
	require.Equal(t, llm.CauseProviderTimeout, llm.FailureCause(err))
	require.Empty(t, llm.FailureCause(errors.New("not a provider error")))
}

// The openai provider's 404 names the address it called, without
// credentials or query, and says what an OpenAI-compatible base URL looks
// like.
func TestOpenAI404NamesTheURL(t *testing.T) {
	t.Parallel()
	peer := llmtest.OpenAI(t, llmtest.Reply{Status: 404})
	base := strings.Replace(peer.URL, "http://", "http://user:secret@", 1) + "/api"
	model, err := llm.NewProvider(context.Background(), llm.ProviderConfig{Provider: "openai", BaseURL: base, HTTPClient: peer.Client()})
	require.NoError(t, err)
	client, err := llm.NewClient(llm.ClientConfig{Model: model, Provider: "openai", Stream: true})
	require.NoError(t, err)
	_, err = client.Generate(context.Background(), llm.Request{Messages: userAsks("hi")}, nil)
	require.Error(t, err)
	msg := apperr.MessageOf(err)
	require.Contains(t, msg, "HTTP 404")
	require.Contains(t, msg, "POST "+peer.URL+"/api/chat/completions")
	require.Contains(t, msg, "ends in /v1")
	require.NotContains(t, err.Error(), "secret")
	require.Equal(t, "gpt-3.5-turbo", peer.Body(t, 0)["model"], "the model sent when none is configured (README says so)")
}
