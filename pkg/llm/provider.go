package llm

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/googleai"
	"github.com/tmc/langchaingo/llms/openai"
)

// ProviderConfig selects and configures a remote provider.
type ProviderConfig struct {
	// Provider is openai, anthropic or googleai.
	Provider string
	// Model is the model name; empty means the provider's default.
	Model string
	// BaseURL points openai at an OpenAI-compatible server (Ollama, vLLM,
	// llama.cpp) or anthropic at a proxy.
	BaseURL string
	APIKey  string
	// HTTPClient carries the provider's requests (default: a client over a
	// StatusRecorder on the default transport).
	HTTPClient *http.Client
}

// NewProvider builds a langchaingo model for a remote provider. It does no
// network I/O.
func NewProvider(ctx context.Context, cfg ProviderConfig) (llms.Model, error) {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: NewStatusRecorder(nil)}
	}
	switch cfg.Provider {
	case "openai":
		opts := []openai.Option{openai.WithHTTPClient(hc)}
		key := cfg.APIKey
		if key == "" && cfg.BaseURL != "" {
			key = "not-needed" // OpenAI-compatible local servers take any key
		}
		opts = append(opts, openai.WithToken(key))
		if cfg.Model != "" {
			opts = append(opts, openai.WithModel(cfg.Model))
		}
		if cfg.BaseURL != "" {
			opts = append(opts, openai.WithBaseURL(cfg.BaseURL))
		}
		return openai.New(opts...)
	case "anthropic":
		opts := []anthropic.Option{anthropic.WithHTTPClient(hc), anthropic.WithToken(cfg.APIKey)}
		if cfg.Model != "" {
			opts = append(opts, anthropic.WithModel(cfg.Model))
		}
		if cfg.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(cfg.BaseURL))
		}
		return anthropic.New(opts...)
	case "googleai":
		opts := []googleai.Option{googleai.WithAPIKey(cfg.APIKey), googleai.WithHTTPClient(hc)}
		if cfg.Model != "" {
			opts = append(opts, googleai.WithDefaultModel(cfg.Model))
		}
		return googleai.New(ctx, opts...)
	}
	return nil, fmt.Errorf("llm: unknown provider %q (want openai, anthropic or googleai)", cfg.Provider)
}
