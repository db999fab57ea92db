package persistence

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A fence's error names only the kinds of runs it refused.
func TestErrFencedNamesWhatItRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  errFenced
		want string
	}{
		{errFenced{taken: []string{"a"}}, "runs [a] are owned by another process now"},
		{errFenced{gone: []string{"b"}}, "runs [b] are gone"},
		{errFenced{taken: []string{"a"}, gone: []string{"b", "c"}}, "runs [a] are owned by another process now; runs [b c] are gone"},
	} {
		require.Equal(t, c.want, c.err.Error())
	}
}
