package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
)

// decode reads a request body strictly into v, a pointer to a struct: the
// body is one JSON object, every field name equals a json tag of v's type
// exactly (case included, recursively through nested objects and arrays of
// objects), no field appears twice, every string (and field name) is valid
// UTF-8 without lone surrogates, no string holds a NUL character, and
// every integer bound for an int field fits 32 bits (the columns it lands
// in).
// encoding/json alone would ignore unknown fields and match names
// case-insensitively, so {"plan_mod": "draft_only"} or {"Plan_Mode": ...}
// would pass unnoticed. Every problem is a 400 invalid_input that names its
// field; an oversized body is a 413, and a body not sent as
// application/json a 415 (so that a web page cannot send one cross-origin
// without a preflight; see edge).
func decode(c echo.Context, v any) error {
	if err := jsonBody(c.Request()); err != nil {
		return err
	}
	dec := json.NewDecoder(c.Request().Body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		var tooLarge *http.MaxBytesError
		var syntax *json.SyntaxError
		switch {
		case errors.As(err, &tooLarge):
			return err
		case errors.Is(err, io.EOF):
			return apperr.New(apperr.Invalid, "request body is empty; expected a JSON object")
		case errors.As(err, &syntax):
			return apperr.New(apperr.Invalid, "malformed JSON at byte %d: %v", syntax.Offset, err)
		}
		return apperr.New(apperr.Invalid, "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return apperr.New(apperr.Invalid, "request body must hold one JSON object and nothing after it")
	}
	return decodeStrict(raw, v)
}

// decodeStrict checks raw against v's type (see decode), then decodes it.
func decodeStrict(raw []byte, v any) error {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && !isJSONObject(raw) && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return apperr.New(apperr.Invalid, "request body must be a JSON object")
	}
	var problems []apperr.FieldError
	checkJSON(raw, t, "", &problems)
	if len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = p.Field + ": " + p.Message
		}
		return apperr.Invalidf(problems, "invalid request body: %s", strings.Join(msgs, "; "))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return apperr.Invalidf([]apperr.FieldError{{Field: typeErr.Field, Message: fmt.Sprintf("must be %s", typeErr.Type)}},
				"invalid JSON field %s: must be %s", typeErr.Field, typeErr.Type)
		}
		return apperr.New(apperr.Invalid, "invalid request body: %v", err)
	}
	return nil
}

func isJSONObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// checkJSON walks one JSON value with t, the Go type it will decode into
// (nil: free-form JSON, where only strings are checked), and appends every
// problem: unknown or mis-cased object keys, duplicate keys, strings that
// are not text or hold NUL, and integers too large for an int field. Values of the wrong JSON type are left to the decoder, which
// names them.
func checkJSON(raw []byte, t reflect.Type, path string, problems *[]apperr.FieldError) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t == rawMessageType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil // free-form, or decoded by its own rules
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '"':
		if msg := textProblem(raw); msg != "" {
			*problems = append(*problems, apperr.FieldError{Field: fieldName(path), Message: msg})
			return
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && strings.ContainsRune(s, 0) {
			*problems = append(*problems, apperr.FieldError{Field: fieldName(path), Message: `must not contain NUL characters (\u0000)`})
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return
		}
		for i, item := range items {
			checkJSON(item, elem, path+"["+strconv.Itoa(i)+"]", problems)
		}
	case '{':
		checkObject(raw, t, path, problems)
	default:
		if msg := intProblem(raw, t); msg != "" {
			*problems = append(*problems, apperr.FieldError{Field: fieldName(path), Message: msg})
		}
	}
}

// intProblem says why the JSON number raw does not fit t when t is int or
// int32, or "". Such fields of a request land in 32-bit columns (a step's
// number, its dependencies, a version), which PostgreSQL refuses beyond
// them — after other rows of the same write went in. A number that is not
// an integer is left to the decoder, which names the type it wants.
func intProblem(raw []byte, t reflect.Type) string {
	if t == nil || (t.Kind() != reflect.Int && t.Kind() != reflect.Int32) || bytes.ContainsAny(raw, ".eE") {
		return ""
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return "" // true, false, null: the decoder's to name
	}
	if _, err := strconv.ParseInt(string(raw), 10, 32); err != nil {
		return fmt.Sprintf("must be a whole number from %d to %d", math.MinInt32, math.MaxInt32)
	}
	return ""
}

func checkObject(raw []byte, t reflect.Type, path string, problems *[]apperr.FieldError) {
	var fields map[string]reflect.Type // nil: any key is allowed
	var elem reflect.Type
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			fields = jsonFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return
	}
	seen := map[string]bool{}
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return
		}
		key, _ := tok.(string)
		// The key as written (with the comma and spaces before it, which
		// are ASCII): the decoder has replaced what is not text already.
		keyRaw := raw[start:dec.InputOffset()]
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return
		}
		at := key
		if path != "" {
			at = path + "." + key
		}
		bad := func(msg string) { *problems = append(*problems, apperr.FieldError{Field: fieldName(at), Message: msg}) }
		if msg := textProblem(keyRaw); msg != "" {
			bad("field name " + msg)
			continue
		}
		if strings.ContainsRune(key, 0) {
			bad(`field name must not contain NUL characters (\u0000)`)
			continue
		}
		if seen[key] {
			bad("appears more than once")
			continue
		}
		seen[key] = true
		valueType := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				bad(unknownField(key, fields))
				continue
			}
			valueType = ft
		}
		checkJSON(value, valueType, at, problems)
	}
}

// textProblem says why a JSON string as written (raw, with its quotes) is
// not text, or "" when it is: RFC 8259 text is valid UTF-8, and a \u
// escape of a UTF-16 surrogate must be the first half of a pair followed
// by the second. encoding/json turns both into U+FFFD silently, which
// would store something other than what the client sent.
func textProblem(raw []byte) string {
	if !utf8.Valid(raw) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			continue // malformed: the decoder reports it
		}
		i += 4
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00: // the first half
			if r2, ok := hex4(raw, i+3); ok && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' && r2 >= 0xdc00 && r2 <= 0xdfff {
				i += 6
				continue
			}
			return fmt.Sprintf(`holds a lone surrogate (\u%04x); text must be valid Unicode`, r)
		case utf16.IsSurrogate(r):
			return fmt.Sprintf(`holds a lone surrogate (\u%04x); text must be valid Unicode`, r)
		}
	}
	return ""
}

// hex4 reads the four hex digits at raw[i:i+4].
func hex4(raw []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// unknownField says that key is not a field, and which field it was
// probably meant to be when only its case differs.
func unknownField(key string, fields map[string]reflect.Type) string {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Sprintf("unknown field; did you mean %q? (field names are case-sensitive)", name)
		}
	}
	return "unknown field"
}

// fieldName is the name of the field at path; the body itself is "body".
func fieldName(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields maps the JSON names of t's fields, as encoding/json sees them
// (tags, untagged names, promoted fields of embedded structs), to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addJSONFields(t, m)
	fieldCache.Store(t, m)
	return m
}

// addJSONFields adds t's own fields first, then those of its embedded
// structs, so that a shallower field wins as it does in encoding/json.
func addJSONFields(t reflect.Type, m map[string]reflect.Type) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	for _, ft := range embedded {
		inner := map[string]reflect.Type{}
		addJSONFields(ft, inner)
		for name, typ := range inner {
			if _, shadowed := m[name]; !shadowed {
				m[name] = typ
			}
		}
	}
}

// rejectNULParams refuses a request whose path parameters or query
// parameters (names or values) hold a NUL character: text from users never
// carries one (docs/ARCHITECTURE.md, "NUL characters"), and PostgreSQL
// cannot store it. Bodies are checked by decode.
func rejectNULParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		var problems []apperr.FieldError
		bad := func(field string) {
			problems = append(problems, apperr.FieldError{Field: field, Message: `must not contain NUL characters (\u0000)`})
		}
		for i, name := range c.ParamNames() {
			if i < len(c.ParamValues()) && strings.ContainsRune(c.ParamValues()[i], 0) {
				bad(name)
			}
		}
		for name, values := range c.QueryParams() {
			if strings.ContainsRune(name, 0) || strings.ContainsRune(strings.Join(values, ""), 0) {
				bad(strings.ReplaceAll(name, "\x00", `\u0000`))
			}
		}
		if len(problems) > 0 {
			return apperr.Invalidf(problems, "invalid request: %s must not contain NUL characters", problems[0].Field)
		}
		return next(c)
	}
}

// hasBody reports whether req carries a body: a length above 0, or a
// chunked one.
func hasBody(req *http.Request) bool {
	return req.ContentLength > 0 || (req.ContentLength < 0 && req.Body != nil && req.Body != http.NoBody)
}

// jsonBody accepts the Content-Type of a request that carries a body:
// application/json, with no charset or utf-8 (JSON text is UTF-8, RFC
// 8259). A request without a body needs none.
func jsonBody(req *http.Request) error {
	if !hasBody(req) {
		return nil
	}
	contentType := req.Header.Get(echo.HeaderContentType)
	mt, params, err := mime.ParseMediaType(contentType)
	if contentType == "" || err != nil || mt != echo.MIMEApplicationJSON {
		return apperr.New(apperr.Unsupported, "request body must be JSON sent as Content-Type: application/json, got %q", contentType)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return apperr.New(apperr.Unsupported, "request body must be UTF-8 JSON, got charset %q", cs)
	}
	return nil
}
