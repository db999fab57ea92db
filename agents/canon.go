package agents

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// callKey identifies a tool call for duplicate detection: the tool name and
// the canonical form of its arguments.
func callKey(name string, args json.RawMessage) string {
	return name + "\x00" + CanonicalJSON(args)
}

// CanonicalJSON returns a form of a JSON document in which key order,
// whitespace and the spelling of equal numbers (1, 1.0, 1e0) do not matter:
// objects have sorted keys, there is no insignificant whitespace, and
// non-integer numbers are written in their shortest float64 form. Empty input
// and null read as {} (a call without arguments). Input that is not one JSON
// value is returned trimmed, as it is.
func CanonicalJSON(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "{}"
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return string(t)
	}
	out, err := json.Marshal(canonNumbers(v))
	if err != nil {
		return string(t)
	}
	return string(out)
}

// canonNumbers rewrites numbers so equal values are spelled alike. Integers
// written as integers keep their digits (no float rounding of big ids).
func canonNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = canonNumbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = canonNumbers(x)
		}
	case json.Number:
		s := v.String()
		if !strings.ContainsAny(s, ".eE") {
			if s == "-0" {
				return json.Number("0")
			}
			return v
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return v
}
