package llm

import (
	"github.com/tmc/langchaingo/llms"

	"github.com/planwright/planwright/pkg/event"
)

// usageKeys are the GenerationInfo keys providers report tokens under:
// openai (PromptTokens, CompletionTokens), anthropic (InputTokens,
// OutputTokens) and googleai (input_tokens, output_tokens).
var usageKeys = [][2]string{
	{"PromptTokens", "CompletionTokens"},
	{"InputTokens", "OutputTokens"},
	{"input_tokens", "output_tokens"},
}

// usageOf reads the usage of a response. Anthropic repeats the message's
// usage on every choice, so the first choice that reports any wins; counts
// are never summed across choices. It reports false when no choice has a
// non-zero count (an OpenAI-compatible server that ignores
// stream_options.include_usage reports zeros).
func usageOf(resp *llms.ContentResponse) (event.Usage, bool) {
	for _, ch := range resp.Choices {
		if ch == nil {
			continue
		}
		for _, k := range usageKeys {
			in, okIn := toInt(ch.GenerationInfo[k[0]])
			out, okOut := toInt(ch.GenerationInfo[k[1]])
			if (okIn || okOut) && in+out > 0 {
				return event.Usage{InputTokens: in, OutputTokens: out}, true
			}
		}
	}
	return event.Usage{}, false
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int32:
		return int(x), true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	}
	return 0, false
}

// estimateUsage guesses tokens, about four characters each, when the
// provider reports none; the result is marked Estimated.
func estimateUsage(req Request, resp Response) event.Usage {
	out := len(resp.Text)
	for _, c := range resp.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	return event.Usage{InputTokens: EstimateInputTokens(req), OutputTokens: (out + 3) / 4, Estimated: true}
}

// EstimateInputTokens is the estimate of a request's prompt tokens, about
// four characters each: what the usage of a call whose provider reports
// none counts, and what a budget reserves for the prompt before a call.
func EstimateInputTokens(req Request) int {
	in := 0
	for _, m := range req.Messages {
		in += len(m.Content) + 16 // role and framing
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return (in + 3) / 4
}
