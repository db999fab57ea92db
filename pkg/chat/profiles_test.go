package chat_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/chat"
)

func TestShippedProfilesCoverEveryContext(t *testing.T) {
	t.Parallel()
	p, err := chat.LoadProfiles("../../configs/contexts.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, p.For(chat.ContextProject).Prompt)
	require.Equal(t, p.For(chat.ContextGlobal), p.For("nonsense"))
}

func TestParseProfilesErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"contexts:\n  moon: {prompt: x}\n", `unknown context type "moon"`},
		{"contexts:\n  global: {prompt: x}\n", `no profile for context type "project"`},
		{"contexts:\n  global: {promt: x}\n", "promt"},
	} {
		_, err := chat.ParseProfiles([]byte(tc.yaml))
		require.Error(t, err)
		require.Contains(t, err.Error(), tc.want)
	}
	_, err := chat.ParseProfiles([]byte("contexts:\n  global: {tools: [nope]}\n"), func(string) bool { return false })
	require.ErrorContains(t, err, `unknown tool set "nope"`)
}
