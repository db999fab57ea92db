package llm

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
)

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
	// CachedInputPerMTok is the price of input tokens the provider served
	// from its prompt cache. No provider adapter reports cached tokens yet:
	// every input token is priced at InputPerMTok.
	CachedInputPerMTok float64 `yaml:"cached_input_per_mtok"`
}

// Prices are the prices of models, by model name (llm.prices).
type Prices map[string]Price

// Check reports every price that is negative or not a number, by field.
func (p Prices) Check(field string) []apperr.FieldError {
	var probs []apperr.FieldError
	bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	for _, model := range slices.Sorted(maps.Keys(p)) {
		pr := p[model]
		if model == "" {
			probs = append(probs, apperr.FieldError{Field: field, Message: "a price needs a model name"})
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"input_per_mtok", pr.InputPerMTok}, {"output_per_mtok", pr.OutputPerMTok}, {"cached_input_per_mtok", pr.CachedInputPerMTok}} {
			if bad(f.v) {
				probs = append(probs, apperr.FieldError{Field: fmt.Sprintf("%s.%s.%s", field, model, f.name), Message: "must be a price of 0 or more"})
			}
		}
	}
	return probs
}

// Priced returns u with its cost for model: CostUSD when the model has a
// price, else CostUnknown (its tokens are counted, their cost is not).
// Without any price (no table configured) costs are not kept: u is
// returned as it is.
func (p Prices) Priced(model string, u event.Usage) event.Usage {
	if len(p) == 0 {
		return u
	}
	pr, ok := p[model]
	if !ok {
		u.CostUSD, u.CostUnknown = 0, u.InputTokens+u.OutputTokens > 0
		return u
	}
	u.CostUSD = (float64(u.InputTokens)*pr.InputPerMTok + float64(u.OutputTokens)*pr.OutputPerMTok) / 1e6
	u.CostUnknown = false
	return u
}
