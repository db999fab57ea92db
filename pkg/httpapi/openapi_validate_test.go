package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/persistence"
)

// TestOpenAPIDocumentIsValid validates the served document as OpenAPI 3.1:
// libopenapi builds its model (every $ref resolves) and libopenapi-validator
// checks it against the official OAS 3.1 JSON Schema. That schema accepts
// any object as a Schema Object, so every schema of the document is also
// checked against the JSON Schema 2020-12 meta-schema, the dialect of 3.1.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t, persistence.DriverSQLite, says("x"), nil)
	resp := env.request(t, context.Background(), "", "GET", "/openapi.yaml", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()

	doc, err := libopenapi.NewDocument(raw)
	require.NoError(t, err)
	require.Equal(t, "3.1.0", doc.GetVersion())
	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs, "libopenapi builds the model: every $ref resolves")
	ok, problems := v.ValidateDocument()
	var msgs []string
	for _, p := range problems {
		msgs = append(msgs, fmt.Sprintf("%s: %s (line %d)", p.Message, p.Reason, p.SpecLine))
		for _, se := range p.SchemaValidationErrors {
			msgs = append(msgs, fmt.Sprintf("  at %s (%s): %s", se.FieldPath, se.KeywordLocation, se.Reason))
		}
	}
	require.True(t, ok, "the document is not valid OpenAPI 3.1:\n%s", strings.Join(msgs, "\n"))

	// Every component schema against the 2020-12 meta-schema: all of them
	// under $defs of one schema resource, compiled (and so meta-validated)
	// together so their references resolve. (Inline schemas are plain
	// {"type": "string"} and {"$ref": ...}.)
	var plain map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &plain))
	js, err := json.Marshal(plain["components"].(map[string]any)["schemas"])
	require.NoError(t, err)
	defs := strings.ReplaceAll(string(js), `"#/components/schemas/`, `"#/$defs/`)
	root, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": ` + defs + `}`))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("mem:///schemas.json", root))
	_, err = c.Compile("mem:///schemas.json")
	require.NoError(t, err, "a component schema is not valid JSON Schema 2020-12")
	for name := range root.(map[string]any)["$defs"].(map[string]any) {
		_, err := c.Compile("mem:///schemas.json#/$defs/" + name)
		require.NoError(t, err, name)
	}
}
