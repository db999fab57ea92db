package chat

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Profile is what a context type gives the planner: a prompt section and
// the tool sets it may use (and put in plan steps).
type Profile struct {
	Prompt   string   `yaml:"prompt"`
	ToolSets []string `yaml:"tools"`
}

// Profiles maps every context type to its profile (configs/contexts.yaml).
type Profiles map[ContextType]Profile

var contextTypes = []ContextType{ContextGlobal, ContextProject, ContextProjectCreate, ContextProjectAudit, ContextProjectForecast,
	ContextCalendar, ContextDailyBriefUpdate, ContextOntology, ContextBrainDump}

// LoadProfiles reads a contexts file; see ParseProfiles.
func LoadProfiles(path string) (Profiles, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("contexts: %w", err)
	}
	p, err := ParseProfiles(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParseProfiles reads a contexts file: a profile for every context type,
// no unknown type, and tool sets that known(name) accepts (when known is
// not nil).
func ParseProfiles(data []byte, known ...func(set string) bool) (Profiles, error) {
	var raw struct {
		Contexts map[string]Profile `yaml:"contexts"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("contexts: %w", err)
	}
	out := Profiles{}
	var problems []string
	for name, p := range raw.Contexts {
		ct, err := ParseContextType(name)
		if err != nil || ct == "" || ContextType(name) != ct {
			problems = append(problems, fmt.Sprintf("unknown context type %q", name))
			continue
		}
		for _, k := range known {
			for _, s := range p.ToolSets {
				if !k(s) {
					problems = append(problems, fmt.Sprintf("%s: unknown tool set %q", name, s))
				}
			}
		}
		out[ct] = p
	}
	for _, ct := range contextTypes {
		if _, ok := out[ct]; !ok {
			problems = append(problems, fmt.Sprintf("no profile for context type %q", ct))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("contexts: %s", strings.Join(problems, "; "))
	}
	return out, nil
}

// For returns the profile of a context type (global for unknown ones).
func (p Profiles) For(ct ContextType) Profile {
	if pr, ok := p[ct]; ok {
		return pr
	}
	return p[ContextGlobal]
}
