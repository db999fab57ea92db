package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
)

// LoadOptions says where Load reads from. The zero value reads the real
// environment and file system.
type LoadOptions struct {
	// Path is the file named on the command line (--config). It wins over
	// PLANWRIGHT_CONFIG; either makes a missing file an error.
	Path string
	// LookupEnv reads the environment; default os.LookupEnv.
	LookupEnv func(key string) (string, bool)
	// ReadFile reads the configuration file; default os.ReadFile.
	ReadFile func(name string) ([]byte, error)
}

// Load builds the configuration: defaults, then the YAML file, then the
// environment, then Validate. Every error is an *apperr.Error with code
// Invalid whose Fields name each bad field (or environment variable) and its
// value; its Error() is one line, such as
//
//	config: database.driver: unknown driver "mysql" (want sqlite or postgres)
//
// A field set from the environment is named with its variable, as in
// `database.driver (PLANWRIGHT_DB_DRIVER)`.
func Load(opts LoadOptions) (Config, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.ReadFile == nil {
		opts.ReadFile = os.ReadFile
	}
	lookup := func(key string) (string, bool) {
		v, ok := opts.LookupEnv(key)
		return v, ok && v != ""
	}

	// origin names where an explicit path came from, for its errors.
	path, origin := opts.Path, ""
	if path != "" {
		origin = "--config"
	} else if p, ok := lookup("PLANWRIGHT_CONFIG"); ok {
		path, origin = p, "PLANWRIGHT_CONFIG"
	} else {
		path = DefaultFile
	}

	cfg := Default()
	data, err := opts.ReadFile(path)
	switch {
	case err == nil:
		if cfg, err = Parse(data); err != nil {
			return Config{}, prefixed(err, path)
		}
		cfg.Source = path
	case errors.Is(err, fs.ErrNotExist) && origin == "":
		// No default file: built-in defaults apply.
	case errors.Is(err, fs.ErrNotExist):
		return Config{}, invalid(apperr.FieldError{Field: origin, Message: fmt.Sprintf("file %q does not exist", path)})
	default:
		return Config{}, invalid(apperr.FieldError{Field: origin, Message: fmt.Sprintf("read %q: %v", path, unwrapPath(err))})
	}

	fromEnv, err := applyEnv(&cfg, lookup)
	if err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		var e *apperr.Error
		if errors.As(err, &e) {
			for i, f := range e.Fields {
				if name, ok := fromEnv[f.Field]; ok {
					e.Fields[i].Field = f.Field + " (" + name + ")"
				}
			}
		}
		return Config{}, err
	}
	return cfg, nil
}

// Parse decodes YAML over the defaults, without the environment and without
// Validate. Unknown or duplicate keys and values of the wrong type are
// errors; every problem is listed, each named by its dotted path.
func Parse(data []byte) (Config, error) {
	cfg := Default()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Config{}, invalid(apperr.FieldError{Field: "yaml", Message: oneLine(err.Error())})
	}
	if len(doc.Content) == 0 { // an empty file
		return cfg, nil
	}
	var probs []apperr.FieldError
	decode(doc.Content[0], reflect.ValueOf(&cfg).Elem(), "", &probs)
	if len(probs) > 0 {
		return Config{}, invalid(probs...)
	}
	return cfg, nil
}

func invalid(fields ...apperr.FieldError) error {
	return apperr.Invalidf(fields, "config")
}

// prefixed names the file in the fields of a Parse error.
func prefixed(err error, path string) error {
	var e *apperr.Error
	if errors.As(err, &e) {
		for i := range e.Fields {
			e.Fields[i].Field = path + ": " + e.Fields[i].Field
		}
	}
	return err
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

var durationType = reflect.TypeFor[time.Duration]()

// decode sets v from node, which sits at path, and records every problem.
func decode(node *yaml.Node, v reflect.Value, path string, probs *[]apperr.FieldError) {
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	problem := func(format string, args ...any) {
		*probs = append(*probs, apperr.FieldError{Field: path, Message: fmt.Sprintf(format, args...)})
	}
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return // an empty key keeps its default
	}
	if v.Kind() == reflect.Struct {
		if node.Kind != yaml.MappingNode {
			problem("want a mapping, got %s", describe(node))
			return
		}
		fields := yamlFields(v.Type())
		seen := map[string]bool{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, val := node.Content[i].Value, node.Content[i+1]
			sub := join(path, key)
			if seen[key] {
				*probs = append(*probs, apperr.FieldError{Field: sub, Message: "duplicate key"})
				continue
			}
			seen[key] = true
			idx, ok := fields[key]
			if !ok {
				*probs = append(*probs, apperr.FieldError{Field: sub, Message: "unknown key"})
				continue
			}
			decode(val, v.Field(idx), sub, probs)
		}
		return
	}
	switch v.Kind() {
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			problem("want a list, got %s", describe(node))
			return
		}
		out := reflect.MakeSlice(v.Type(), len(node.Content), len(node.Content))
		for i, item := range node.Content {
			decode(item, out.Index(i), fmt.Sprintf("%s[%d]", path, i), probs)
		}
		v.Set(out)
		return
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			problem("want a mapping, got %s", describe(node))
			return
		}
		out := reflect.MakeMapWithSize(v.Type(), len(node.Content)/2)
		for i := 0; i+1 < len(node.Content); i += 2 {
			val := reflect.New(v.Type().Elem()).Elem()
			decode(node.Content[i+1], val, join(path, node.Content[i].Value), probs)
			out.SetMapIndex(reflect.ValueOf(node.Content[i].Value), val)
		}
		v.Set(out)
		return
	}
	if node.Kind != yaml.ScalarNode {
		problem("want a single value, got %s", describe(node))
		return
	}
	if err := setScalar(v, node.Value); err != nil {
		problem("%v", err)
	}
}

var budgetDurationType = reflect.TypeFor[budget.Duration]()

// setScalar parses s into v by v's type: the rules shared by YAML values and
// environment variables.
func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == durationType || v.Type() == budgetDurationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
				return fmt.Errorf("invalid duration %q (give a unit, such as %ss)", s, s)
			}
			return fmt.Errorf("invalid duration %q", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q (want true or false)", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetFloat(f)
	default:
		// A programming error: a Config field of a type this decoder lacks.
		panic(fmt.Sprintf("config: unsupported field type %s", v.Type()))
	}
	return nil
}

// yamlFields maps yaml keys to field indexes; fields tagged "-" are absent.
func yamlFields(t reflect.Type) map[string]int {
	out := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" {
			out[tag] = i
		}
	}
	return out
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return strconv.Quote(n.Value)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// envVar is one environment variable and the field it sets.
type envVar struct {
	Name string
	// Field is the dotted yaml path it overrides; empty for secrets that
	// have no yaml key.
	Field string
	set   func(c *Config) reflect.Value
}

// envVars lists every environment variable Load reads, besides
// PLANWRIGHT_CONFIG.
var envVars = []envVar{
	{"PLANWRIGHT_ADDR", "server.addr", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Server.Addr) }},
	{"PLANWRIGHT_DB_DRIVER", "database.driver", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Database.Driver) }},
	{"PLANWRIGHT_DB_DSN", "database.dsn", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Database.DSN) }},
	{"PLANWRIGHT_DB_MAX_OPEN_CONNS", "database.max_open_conns", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Database.MaxOpenConns) }},
	{"PLANWRIGHT_LLM_PROVIDER", "llm.provider", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.Provider) }},
	{"PLANWRIGHT_LLM_MODEL", "llm.model", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.Model) }},
	{"PLANWRIGHT_LLM_BASE_URL", "llm.base_url", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.BaseURL) }},
	{"PLANWRIGHT_LLM_SCRIPT", "llm.script", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.Script) }},
	{"PLANWRIGHT_LLM_STREAM", "llm.stream", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.Stream) }},
	{"PLANWRIGHT_AUTH_MODE", "auth.mode", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Auth.Mode) }},
	{"PLANWRIGHT_RUNS_LEASE_TIMEOUT", "runs.lease_timeout", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Runs.LeaseTimeout) }},
	{"PLANWRIGHT_LOG_LEVEL", "log.level", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Log.Level) }},
	{"OTEL_SERVICE_NAME", "telemetry.service_name", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Telemetry.ServiceName) }},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "telemetry.otlp_endpoint", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Telemetry.OTLPEndpoint) }},
	{"PLANWRIGHT_SERVER", "client.server", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Client.Server) }},
	{"PLANWRIGHT_API_KEY", "", func(c *Config) reflect.Value { return reflect.ValueOf(&c.Client.APIKey) }},
	{"OPENAI_API_KEY", "", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.OpenAIAPIKey) }},
	{"ANTHROPIC_API_KEY", "", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.AnthropicAPIKey) }},
	{"GOOGLE_API_KEY", "", func(c *Config) reflect.Value { return reflect.ValueOf(&c.LLM.GoogleAPIKey) }},
}

// EnvVars returns the names of every environment variable Load reads,
// PLANWRIGHT_CONFIG first.
func EnvVars() []string {
	out := []string{"PLANWRIGHT_CONFIG"}
	for _, e := range envVars {
		out = append(out, e.Name)
	}
	return append(out, tracesExporter)
}

// applyEnv overrides cfg with every set, non-empty variable. It returns the
// variable that set each field, by dotted path.
func applyEnv(cfg *Config, lookup func(string) (string, bool)) (map[string]string, error) {
	from := map[string]string{}
	var probs []apperr.FieldError
	for _, e := range envVars {
		s, ok := lookup(e.Name)
		if !ok {
			continue
		}
		if err := setScalar(e.set(cfg).Elem(), s); err != nil {
			probs = append(probs, apperr.FieldError{Field: e.Name, Message: err.Error()})
			continue
		}
		if e.Field != "" {
			from[e.Field] = e.Name
		}
	}
	if s, ok := lookup(tracesExporter); ok {
		switch strings.TrimSpace(s) {
		case "otlp":
			cfg.Telemetry.Traces = true
			from["telemetry.traces"] = tracesExporter
		case "none":
			cfg.Telemetry.Traces = false
			from["telemetry.traces"] = tracesExporter
		default:
			probs = append(probs, apperr.FieldError{Field: tracesExporter, Message: fmt.Sprintf("unknown exporter %q (want otlp or none)", s)})
		}
	}
	if len(probs) > 0 {
		return nil, invalid(probs...)
	}
	return from, nil
}

// tracesExporter turns tracing on (otlp) or off (none), as OpenTelemetry's
// SDKs read it.
const tracesExporter = "OTEL_TRACES_EXPORTER"
