package planmode_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/planmode"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    planmode.Mode
		wantErr string
	}{
		{"", "", ""},
		{"auto_execute", planmode.AutoExecute, ""},
		{"draft_only", planmode.DraftOnly, ""},
		{"agent_review", planmode.AgentReview, ""},
		{"Draft_Only", "", `unknown mode "Draft_Only" (want auto_execute, draft_only or agent_review)`},
		{"bogus", "", `unknown mode "bogus" (want auto_execute, draft_only or agent_review)`},
	} {
		got, err := planmode.Parse(tc.in)
		if tc.wantErr != "" {
			require.EqualError(t, err, tc.wantErr, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got)
	}
	for _, m := range planmode.All {
		require.True(t, m.Valid(), m)
	}
	require.False(t, planmode.Mode("").Valid())
}

func TestResolve(t *testing.T) {
	t.Parallel()
	const (
		auto   = planmode.AutoExecute
		draft  = planmode.DraftOnly
		review = planmode.AgentReview
	)
	for _, tc := range []struct {
		request, planner, def, min, want planmode.Mode
	}{
		{"", "", auto, "", auto},
		{"", draft, auto, "", draft},
		{review, draft, auto, "", review},
		{"", "", draft, "", draft},
		{auto, "", auto, review, review},
		{draft, "", auto, review, draft},
		{auto, "", auto, draft, draft},
		{review, "", auto, draft, draft},
		{"bogus", "", auto, "", auto},
	} {
		require.Equal(t, tc.want, planmode.Resolve(tc.request, tc.planner, tc.def, tc.min), "%+v", tc)
	}
}
