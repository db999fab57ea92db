package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/logctx"
)

func TestHookAddsContextFields(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := zerolog.New(&buf).Hook(logctx.Hook{})
	ctx := logctx.With(logctx.With(context.Background(), "request_id", "r1"), "user", "alice")
	ctx = logctx.With(ctx, "user", "bob")
	ctx = logctx.With(ctx, "empty", "")
	log.Warn().Ctx(ctx).Msg("deep inside")
	log.Info().Msg("no context")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var first, second map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	require.NoError(t, json.Unmarshal(lines[1], &second))
	require.Equal(t, "r1", first["request_id"])
	require.Equal(t, "bob", first["user"], "a later value wins")
	require.NotContains(t, first, "empty")
	require.NotContains(t, second, "request_id")
	require.Equal(t, map[string]string{"request_id": "r1", "user": "bob"}, logctx.Fields(ctx))
}
