package llm

import (
	"context"
	"net/http"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/planwright/planwright/pkg/apperr"
)

// Remote providers NewProvider builds. The scripted and demo models are
// plain llms.Models that cmd wires itself.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderGoogleAI  = "googleai"
)

// ProviderConfig selects and configures a remote provider.
type ProviderConfig struct {
	// Provider is openai, anthropic or googleai.
	Provider string
	// Model is the model name; empty means the provider's default.
	Model string
	// BaseURL points openai at an OpenAI-compatible server (Ollama, vLLM,
	// llama.cpp), anthropic at a proxy, or googleai at another host (the
	// requests go to BaseURL + "/v1beta/models/…"); empty means the
	// provider's own endpoint.
	BaseURL string
	// The provider keys; only the selected provider's is used. The openai
	// key may be empty when BaseURL is set (local servers take any key).
	OpenAIAPIKey    string
	AnthropicAPIKey string
	GoogleAPIKey    string
	// HTTPClient carries the provider's requests (http.DefaultTransport
	// when nil). NewProvider does not modify it: it wraps its transport in
	// a copy, to record statuses and Retry-After for the Client's retries.
	HTTPClient *http.Client
}

// NewProvider builds an llms.Model for a remote provider: langchaingo's
// for openai and anthropic, planwright's own Gemini REST model for googleai
// (googleai.go). It does no network I/O and starts nothing, so a model
// needs no closing; ctx is unused. A missing key or unknown provider is an
// apperr.Invalid error naming the field.
//
// Use the model through a Client: the Client shapes messages the way each
// provider's langchaingo code needs them, and reads the statuses the
// transport installed here records.
func NewProvider(_ context.Context, cfg ProviderConfig) (llms.Model, error) {
	invalid := func(field, msg string) error {
		return apperr.Invalidf([]apperr.FieldError{{Field: field, Message: msg}}, "llm: invalid provider config")
	}
	switch cfg.Provider {
	case ProviderOpenAI:
		key := cfg.OpenAIAPIKey
		if key == "" {
			if cfg.BaseURL == "" {
				return nil, invalid("OpenAIAPIKey", "is required for the openai provider without a base URL (OPENAI_API_KEY)")
			}
			key = "unused" // OpenAI-compatible local servers take any key
		}
		opts := []openai.Option{openai.WithHTTPClient(wrapClient(cfg.HTTPClient, dialectOpenAI, nil)), openai.WithToken(key)}
		if cfg.Model != "" {
			opts = append(opts, openai.WithModel(cfg.Model))
		}
		if cfg.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(cfg.BaseURL))
		}
		m, err := openai.New(opts...)
		if err != nil {
			return nil, apperr.Wrap(apperr.Invalid, err, "llm: building the openai provider")
		}
		return m, nil
	case ProviderAnthropic:
		if cfg.AnthropicAPIKey == "" {
			return nil, invalid("AnthropicAPIKey", "is required for the anthropic provider (ANTHROPIC_API_KEY)")
		}
		merge := func(next http.RoundTripper) http.RoundTripper { return anthropicTurns{next: next} }
		opts := []anthropic.Option{anthropic.WithHTTPClient(wrapClient(cfg.HTTPClient, dialectAnthropic, merge)), anthropic.WithToken(cfg.AnthropicAPIKey)}
		if cfg.Model != "" {
			opts = append(opts, anthropic.WithModel(cfg.Model))
		}
		if cfg.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(cfg.BaseURL))
		}
		m, err := anthropic.New(opts...)
		if err != nil {
			return nil, apperr.Wrap(apperr.Invalid, err, "llm: building the anthropic provider")
		}
		return m, nil
	case ProviderGoogleAI:
		if cfg.GoogleAPIKey == "" {
			return nil, invalid("GoogleAPIKey", "is required for the googleai provider (GOOGLE_API_KEY)")
		}
		key := func(next http.RoundTripper) http.RoundTripper {
			return apiKeyTransport{key: cfg.GoogleAPIKey, next: next}
		}
		return newGoogleAI(wrapClient(cfg.HTTPClient, dialectGoogleAI, key), cfg.BaseURL, cfg.Model, cfg.GoogleAPIKey), nil
	}
	return nil, invalid("Provider", "must be openai, anthropic or googleai, not "+quote(cfg.Provider))
}

func quote(s string) string { return `"` + s + `"` }

// wrapClient returns a copy of hc (a new client when nil) whose transport
// records statuses for the Client, under the provider-specific transport
// extra makes (when not nil), guarding streams of dialect d.
func wrapClient(hc *http.Client, d dialect, extra func(http.RoundTripper) http.RoundTripper) *http.Client {
	out := &http.Client{}
	if hc != nil {
		*out = *hc //nolint:govet // copying the config of a client, not one in use
	}
	next := out.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	if extra != nil {
		next = extra(next)
	}
	out.Transport = statusTransport{next: next, dialect: d}
	return out
}

// isAnthropic reports whether calls go to langchaingo's anthropic provider.
func isAnthropic(provider string, m llms.Model) bool {
	_, ok := m.(*anthropic.LLM)
	return ok || provider == ProviderAnthropic
}
