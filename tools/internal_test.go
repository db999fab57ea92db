package tools

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTruncate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short", "abc", 5, "abc"},
		{"exactly the limit", "abcde", 5, "abcde"},
		{"cut", "abcdefgh", 5, "abcde\n[… truncated: 3 of 8 characters cut]"},
		{"multi-byte within the limit", "ééééé", 5, "ééééé"},
		{"multi-byte cut on a character boundary", "日本語のテキスト", 3, "日本語\n[… truncated: 5 of 8 characters cut]"},
		{"empty", "", 5, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, truncate(tt.in, tt.max))
		})
	}
}

func TestPointer(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/", pointer(nil))
	require.Equal(t, "/steps/0/title", pointer([]string{"steps", "0", "title"}))
	require.Equal(t, "/a~1b/c~0d", pointer([]string{"a/b", "c~d"}))
}

func TestJSONOrString(t *testing.T) {
	t.Parallel()
	require.Equal(t, `{}`, string(jsonOrString(nil)))
	require.Equal(t, `{}`, string(jsonOrString([]byte("  "))))
	require.Equal(t, `{"a":1}`, string(jsonOrString([]byte(`{"a":1}`))))
	require.Equal(t, `"{\"a\":"`, string(jsonOrString([]byte(`{"a":`))))
}

func TestSchemaCacheCompilesOnce(t *testing.T) {
	t.Parallel()
	var c schemaCache
	raw := []byte(`{"type": "object"}`)
	a, err := c.get(raw)
	require.NoError(t, err)
	b, err := c.get([]byte(`{"type": "object"}`))
	require.NoError(t, err)
	require.Same(t, a, b)
	_, err = c.get([]byte(`{"type": "array"}`))
	require.ErrorContains(t, err, `"type": "object"`)
	_, err = c.get([]byte(`{"type": "array"}`))
	require.ErrorContains(t, err, `"type": "object"`, "failures are cached too")
	require.Len(t, c.m, 2)
}

func FuzzValidate(f *testing.F) {
	s, err := compileSchema([]byte(`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"array","items":{"type":"integer"}}},"required":["a"],"additionalProperties":false}`))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{"a":"x"}`, `{"b":[1,"2"]}`, `{`, ``, `null`, `[1]`, `{"a":"toolong","c":1}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, args string) {
		err := s.validate([]byte(args))
		if err == nil {
			return
		}
		ae, ok := err.(*argumentsError)
		if !ok {
			t.Fatalf("validate returned %T, want *argumentsError", err)
		}
		text := violationText("t", ae)
		if !strings.HasPrefix(text, `tool "t": invalid arguments`) {
			t.Fatalf("unexpected text %q", text)
		}
		for _, fe := range ae.err.Fields {
			if !strings.HasPrefix(fe.Field, "/") || fe.Message == "" {
				t.Fatalf("violation without a location or message: %+v", fe)
			}
		}
	})
}
