package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
)

// FuzzDecodeStrict: whatever decodeStrict accepts, encoding/json decodes to
// the same value; and it never accepts a key that is not a json tag.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"message": "x"}`, `{"message": "x", "plan_mod": "y"}`, `{"Message": "x"}`, `{"message": "a", "message": "b"}`,
		`{"message": "x", "project_focus": {"project_id": "p", "Entity_ID": "e"}}`, `{"message": "\u0000"}`, `null`, `[]`,
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
