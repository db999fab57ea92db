package agents_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/agents"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		a, b string
		same bool
	}{
		{"key order", `{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{"whitespace", `{"a": [1, 2]}`, "{\n  \"a\":[1,2]\n}", true},
		{"nested key order", `{"x":{"a":1,"b":{"c":2,"d":3}}}`, `{"x":{"b":{"d":3,"c":2},"a":1}}`, true},
		{"number spelling", `{"n":1}`, `{"n":1.0}`, true},
		{"exponent", `{"n":100}`, `{"n":1e2}`, true},
		{"negative zero", `{"n":-0}`, `{"n":0}`, true},
		{"empty is the empty object", ``, `{}`, true},
		{"null is the empty object", `null`, ` {} `, true},
		{"different values", `{"a":1}`, `{"a":2}`, false},
		{"array order matters", `[1,2]`, `[2,1]`, false},
		{"string vs number", `{"a":"1"}`, `{"a":1}`, false},
		{"big integers keep their digits", `{"id":12345678901234567890}`, `{"id":12345678901234567891}`, false},
		{"invalid JSON compares as text", `{"a":`, `{"a":`, true},
		{"two values are not one", `{} {}`, `{}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := agents.CanonicalJSON([]byte(tc.a)), agents.CanonicalJSON([]byte(tc.b))
			if tc.same {
				require.Equal(t, a, b)
			} else {
				require.NotEqual(t, a, b)
			}
		})
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2.50,{"z":null}]}`, `[]`, `"x"`, `1e3`, ``, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := agents.CanonicalJSON(data)
		if !json.Valid(data) {
			return
		}
		require.True(t, json.Valid([]byte(c)), "canonical form of valid JSON is valid: %q", c)
		require.Equal(t, c, agents.CanonicalJSON([]byte(c)), "canonicalisation is idempotent")
	})
}
