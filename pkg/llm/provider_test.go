package llm_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/llm"
)

// noNetwork fails any request: NewProvider must not do network I/O.
type noNetwork struct{ t *testing.T }

func (n noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	n.t.Error("NewProvider made a request")
	return nil, http.ErrHandlerTimeout
}

func TestNewProvider(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   llm.ProviderConfig
		field string // the field an Invalid error names; "" for success
	}{
		{"openai", llm.ProviderConfig{Provider: "openai", OpenAIAPIKey: "k"}, ""},
		{"openai-compatible server without a key", llm.ProviderConfig{Provider: "openai", BaseURL: "http://127.0.0.1:11434/v1"}, ""},
		{"openai without a key", llm.ProviderConfig{Provider: "openai"}, "OpenAIAPIKey"},
		{"anthropic", llm.ProviderConfig{Provider: "anthropic", AnthropicAPIKey: "k", Model: "claude-x"}, ""},
		{"anthropic without a key", llm.ProviderConfig{Provider: "anthropic", OpenAIAPIKey: "k"}, "AnthropicAPIKey"},
		{"googleai", llm.ProviderConfig{Provider: "googleai", GoogleAPIKey: "k"}, ""},
		{"googleai at another host", llm.ProviderConfig{Provider: "googleai", GoogleAPIKey: "k", Model: "gemini-x", BaseURL: "http://127.0.0.1:1"}, ""},
		{"googleai without a key", llm.ProviderConfig{Provider: "googleai"}, "GoogleAPIKey"},
		{"unknown", llm.ProviderConfig{Provider: "nope"}, "Provider"},
		{"scripted is wired by cmd", llm.ProviderConfig{Provider: "scripted"}, "Provider"},
	} {
		tc.cfg.HTTPClient = &http.Client{Transport: noNetwork{t}}
		m, err := llm.NewProvider(context.Background(), tc.cfg)
		if tc.field == "" {
			require.NoError(t, err, tc.name)
			require.NotNil(t, m, tc.name)
			if c, ok := m.(interface{ Close() error }); ok {
				require.NoError(t, c.Close())
			}
			continue
		}
		require.Error(t, err, tc.name)
		require.Equal(t, apperr.Invalid, apperr.CodeOf(err), tc.name)
		require.Equal(t, tc.field, apperr.FieldsOf(err)[0].Field, tc.name)
	}
}

func TestNewClientValidatesEveryField(t *testing.T) {
	t.Parallel()
	_, err := llm.NewClient(llm.ClientConfig{CallTimeout: -1, Backoff: -1})
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	var fields []string
	for _, f := range apperr.FieldsOf(err) {
		fields = append(fields, f.Field)
	}
	require.Equal(t, []string{"Model", "CallTimeout", "Backoff"}, fields)
}
