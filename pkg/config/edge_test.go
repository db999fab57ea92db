package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/config"
)

func TestValidateServerEdge(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte("server:\n  allowed_hosts: [planwright.example.com, \"*\"]\n  allowed_origins: [\"https://console.example.com\", \"http://127.0.0.1:3000\"]\n"))
	require.NoError(t, err)
	require.NoError(t, cfg.Validate())
	require.Equal(t, []string{"planwright.example.com", "*"}, cfg.Server.AllowedHosts)

	cfg = config.Default()
	cfg.Server.MaxWatchStreamsPerUser = 0
	cfg.Server.AllowedHosts = []string{"ok.example", "https://x.example", "x.example:80", " "}
	cfg.Server.AllowedOrigins = []string{"https://ok.example", "ok.example", "https://x.example/app", "null"}
	got := map[string]string{}
	for _, f := range apperr.FieldsOf(cfg.Validate()) {
		got[f.Field] = f.Message
	}
	require.Equal(t, map[string]string{
		"server.max_watch_streams_per_user": "must be between 1 and 10000, got 0",
		"server.allowed_hosts[1]":           `"https://x.example" is not a host name (no scheme, port or path; "*" for any)`,
		"server.allowed_hosts[2]":           `"x.example:80" is not a host name (no scheme, port or path; "*" for any)`,
		"server.allowed_hosts[3]":           `" " is not a host name (no scheme, port or path; "*" for any)`,
		"server.allowed_origins[1]":         `"ok.example" is not an origin (http:// or https://host[:port])`,
		"server.allowed_origins[2]":         `"https://x.example/app" is not an origin (http:// or https://host[:port])`,
		"server.allowed_origins[3]":         `"null" is not an origin (http:// or https://host[:port])`,
	}, got)
}
