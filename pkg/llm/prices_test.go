package llm_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/pkg/llm"
	"github.com/planwright/planwright/pkg/llm/llmtest"
)

// Each call's usage is priced by the model it went to — the request's, or
// the client's when the request names none — from the provider's reported
// tokens; a model without a price counts its tokens and says its cost is
// unknown; without a price table nothing is priced.
func TestCallsArePricedByTheirModel(t *testing.T) {
	t.Parallel()
	prices := llm.Prices{"big": {InputPerMTok: 3, OutputPerMTok: 15}, "small": {InputPerMTok: 0.25, OutputPerMTok: 1.25}}
	reply := llmtest.Reply{Chunks: []string{"ok"}, InputTokens: 2000, OutputTokens: 400}
	for _, tc := range []struct {
		name, clientModel, reqModel string
		prices                      llm.Prices
		want                        event.Usage
	}{
		{"the client's model", "big", "", prices, event.Usage{InputTokens: 2000, OutputTokens: 400, CostUSD: 0.012}},
		{"the request's model wins", "big", "small", prices, event.Usage{InputTokens: 2000, OutputTokens: 400, CostUSD: 0.001}},
		{"a model without a price", "big", "other", prices, event.Usage{InputTokens: 2000, OutputTokens: 400, CostUnknown: true}},
		{"no price table", "big", "", nil, event.Usage{InputTokens: 2000, OutputTokens: 400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessWith(t, "openai", func(c *llm.ClientConfig) {
				c.ModelName, c.Prices, c.CallTimeout = tc.clientModel, tc.prices, 5*time.Second
			}, reply)
			var p parts
			resp, err := h.client.Generate(context.Background(), llm.Request{Role: "planner", Model: tc.reqModel, Messages: userAsks("hi")}, p.on)
			require.NoError(t, err)
			require.InDelta(t, tc.want.CostUSD, resp.Usage.CostUSD, 1e-12)
			resp.Usage.CostUSD = tc.want.CostUSD
			require.Equal(t, tc.want, resp.Usage)
			require.Len(t, p.usage, 1)
			require.InDelta(t, tc.want.CostUSD, p.usage[0].CostUSD, 1e-12, "the streamed usage part carries the cost too")
		})
	}
}

func TestUsageAddsCosts(t *testing.T) {
	t.Parallel()
	u := event.Usage{InputTokens: 1, CostUSD: 0.5}.Add(event.Usage{OutputTokens: 2, CostUSD: 0.25, CostUnknown: true})
	require.Equal(t, event.Usage{InputTokens: 1, OutputTokens: 2, TotalTokens: 3, CostUSD: 0.75, CostUnknown: true}, u)
}

func TestAClientRefusesABadPrice(t *testing.T) {
	t.Parallel()
	_, err := llm.NewClient(llm.ClientConfig{Model: nil, Prices: llm.Prices{"m": {InputPerMTok: -1, OutputPerMTok: math.NaN()}}})
	require.Error(t, err)
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.ElementsMatch(t, []string{"Model", "Prices.m.input_per_mtok", "Prices.m.output_per_mtok"}, fields)
}
