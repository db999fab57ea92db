package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
)

// FuzzDecodeStrict: whatever decodeStrict accepts, encoding/json decodes to
// the same value; and it never accepts a key that is not a json tag.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"message": "x"}`, `{"message": "x", "plan_mod": "y"}`, `{"Message": "x"}`, `{"message": "a", "message": "b"}`,
		`{"message": "x", "project_focus": {"project_id": "p", "Entity_ID": "e"}}`, `{"message": "\u0000"}`, `null`, `[]`,
		`{"message": "\ud800"}`, `{"message": "\ud83d\ude00"}`, "{\"message\": \"caf\xe9\"}", `{"message": "\udc00\ud800"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) {
			return
		}
		var strict StreamRequest
		err := decodeStrict([]byte(body), &strict)
		if err != nil {
			require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
			return
		}
		require.True(t, utf8.ValidString(body), "accepted text that is not UTF-8")
		var loose StreamRequest
		require.NoError(t, json.Unmarshal([]byte(body), &loose))
		require.Equal(t, loose, strict)
		var keys map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &keys) == nil {
			fields := jsonFields(reflect.TypeFor[StreamRequest]())
			for k := range keys {
				require.Contains(t, fields, k)
			}
		}
	})
}

// textProblem accepts valid text, escaped or not, and names what is not:
// bytes that are not UTF-8 and halves of surrogate pairs standing alone.
func TestTextProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw, want string
	}{
		{`"plain"`, ""},
		{`"café ☕ 😀"`, ""},
		{`"\u00e9 \u2615 \ud83d\ude00"`, ""},
		{`"\uD83D\uDE00"`, ""},
		{`"\\ud800"`, ""}, // an escaped backslash, then text
		{`"\ufffd"`, ""},
		{`"\n\t\"\/"`, ""},
		{"\"caf\xe9\"", "not valid UTF-8"},
		{"\"\xed\xa0\x80\"", "not valid UTF-8"}, // a surrogate encoded as UTF-8
		{`"\ud800"`, `lone surrogate (\ud800)`},
		{`"a\ud83dz"`, `lone surrogate (\ud83d)`},
		{`"\ud83d\u0041"`, `lone surrogate (\ud83d)`},
		{`"\ud83d\ud83d"`, `lone surrogate (\ud83d)`},
		{`"\ude00"`, `lone surrogate (\ude00)`},
		{`"\ude00\ud83d"`, `lone surrogate (\ude00)`},
		{`"\ud83d"`, `lone surrogate (\ud83d)`},
	} {
		got := textProblem([]byte(tc.raw))
		if tc.want == "" {
			require.Empty(t, got, tc.raw)
			continue
		}
		require.Contains(t, got, tc.want, tc.raw)
	}
}

// An integer bound for an int field fits 32 bits; other numbers, and
// fields of other types, are the decoder's to judge.
func TestIntProblem(t *testing.T) {
	t.Parallel()
	intT, int64T, floatT := reflect.TypeFor[int](), reflect.TypeFor[int64](), reflect.TypeFor[float64]()
	for _, tc := range []struct {
		raw string
		t   reflect.Type
		bad bool
	}{
		{"0", intT, false}, {"2147483647", intT, false}, {"-2147483648", intT, false},
		{"2147483648", intT, true}, {"-2147483649", intT, true}, {"3000000000", intT, true},
		{"99999999999999999999999", intT, true},
		{"1.5", intT, false}, {"3e9", intT, false}, {"true", intT, false}, {"null", intT, false},
		{"3000000000", int64T, false}, {"3000000000", floatT, false}, {"3000000000", nil, false},
	} {
		require.Equal(t, tc.bad, intProblem([]byte(tc.raw), tc.t) != "", "%s as %v", tc.raw, tc.t)
	}
}
