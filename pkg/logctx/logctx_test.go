package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

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

func TestHookAddsTheActiveSpan(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := zerolog.New(&buf).Hook(logctx.Hook{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	log.Info().Ctx(trace.ContextWithSpanContext(context.Background(), sc)).Msg("in a span")
	log.Info().Ctx(context.Background()).Msg("in none")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var first, second map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &first))
	require.NoError(t, json.Unmarshal(lines[1], &second))
	require.Equal(t, sc.TraceID().String(), first["trace_id"])
	require.Equal(t, sc.SpanID().String(), first["span_id"])
	require.NotContains(t, second, "trace_id")
}
