package persistence

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestEscapeText(t *testing.T) {
	t.Parallel()
	const e = escapeMark
	cases := []struct{ in, want string }{
		{"", ""},
		{"plain text, no escape", "plain text, no escape"},
		{`a \ backslash and \\ two`, `a \ backslash and \\ two`},
		{"nul\x00here", "nul" + e + "0here"},
		{"\x00\x00", e + "0" + e + "0"},
		{"mark " + e + " inside", "mark " + e + e + " inside"},
		{e + "0", e + e + "0"},
		{`{"a":"x\u0000y"}`, `{"a":"x` + e + `jy"}`},
		{`{"a":"\\u0000"}`, `{"a":"\\u0000"}`}, // an escaped backslash, then text
		{`{"a":"\\\u0000"}`, `{"a":"\\` + e + `j"}`},
		{`"\ue000" "\uE000"`, `"` + e + `u" "` + e + `U"`},
		{`\u00000`, e + "j0"},
		{"trailing \\", "trailing \\"},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, escapeText(tc.in), "%q", tc.in)
		require.Equal(t, tc.in, unescapeText(tc.want), "%q", tc.want)
		require.Equal(t, []byte(tc.want), escapeText([]byte(tc.in)))
	}
	// A mark that starts no escape (text stored before escaping) stays.
	require.Equal(t, "old "+e+"x", unescapeText("old "+e+"x"))
	require.Equal(t, "end "+e, unescapeText("end "+e))
}

// FuzzEscapeText: the escape round-trips any bytes; its output has no NUL
// byte; and valid JSON stays valid JSON with no \u0000 escape, holding the
// same value once unescaped.
func FuzzEscapeText(f *testing.F) {
	for _, s := range []string{"", "a\x00b", `{"x":"\u0000"}`, `["\\", "\\\u0000", "\ue000", "` + escapeMark + `"]`, escapeMark + "j"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		esc := escapeText(s)
		require.Equal(t, s, unescapeText(esc))
		require.NotContains(t, esc, "\x00")
		if utf8.ValidString(s) {
			require.True(t, utf8.ValidString(esc))
		}
		if !json.Valid([]byte(s)) {
			return
		}
		require.True(t, json.Valid([]byte(esc)), "escaped JSON is JSON: %q", esc)
		var plain, after any
		require.NoError(t, json.Unmarshal([]byte(s), &plain))
		if nulEscapes(esc) {
			t.Fatalf("escaped JSON still holds \\u0000: %q", esc)
		}
		require.NoError(t, json.Unmarshal([]byte(unescapeText(esc)), &after))
		require.Equal(t, plain, after)
	})
}

// nulEscapes reports whether JSON text holds a \u0000 escape (one whose
// backslash is not itself escaped).
func nulEscapes(js string) bool {
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' {
			continue
		}
		if strings.HasPrefix(js[i:], `\u0000`) {
			return true
		}
		i++ // skip the escaped character
	}
	return false
}
