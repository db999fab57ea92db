package multitask_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/multitask"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want multitask.Strategy
		err  string
	}{
		{"", "", ""},
		{"reject", multitask.Reject, ""},
		{"enqueue", multitask.Enqueue, ""},
		{"interrupt", multitask.Interrupt, ""},
		{"Reject", "", `unknown strategy "Reject" (want reject, enqueue or interrupt)`},
		{"queue", "", `unknown strategy "queue" (want reject, enqueue or interrupt)`},
	} {
		got, err := multitask.Parse(tc.in)
		if tc.err != "" {
			require.EqualError(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		require.Equal(t, tc.in != "", got.Valid(), tc.in)
	}
}
