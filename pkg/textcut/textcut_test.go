package textcut_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/textcut"
)

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{
		{"hello", 5, "hello", false},
		{"hello", 10, "hello", false},
		{"hello", 4, "hel…", true},
		{"héllo wörld", 6, "héllo…", true},
		{"日本語のテキスト", 3, "日本…", true},
		{"hello", 1, "…", true},
		{"hello", 0, "…", true},
		{"", 0, "", false},
	} {
		got, cut := textcut.CutReport(tc.in, tc.n)
		require.Equal(t, tc.want, got, "%q %d", tc.in, tc.n)
		require.Equal(t, tc.cut, cut, "%q %d", tc.in, tc.n)
		require.Equal(t, tc.want, textcut.Cut(tc.in, tc.n))
	}
}

func FuzzCut(f *testing.F) {
	f.Add("héllo wörld", 4)
	f.Add(strings.Repeat("é", 50), 10)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if !utf8.ValidString(s) || n < 0 || n > 1000 {
			return
		}
		got, cut := textcut.CutReport(s, n)
		require.True(t, utf8.ValidString(got))
		if !cut {
			require.Equal(t, s, got)
			return
		}
		require.LessOrEqual(t, utf8.RuneCountInString(got), max(n, 1))
		require.True(t, strings.HasSuffix(got, textcut.Ellipsis))
		require.True(t, strings.HasPrefix(s, strings.TrimSuffix(got, textcut.Ellipsis)))
	})
}
