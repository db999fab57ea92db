package llm

import (
	"fmt"
	"regexp"
	"strings"
)

// Providers accept tool names matching ^[a-zA-Z0-9_-]{1,64}$; planwright's
// MCP tools are named "server.tool". names maps them to provider-safe names
// for one call and back.
var (
	providerSafe   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	providerUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]`)
)

type names struct {
	out  map[string]string // ours → provider's
	back map[string]string // provider's → ours
}

func newNames(defs []ToolDef, msgs []Message) *names {
	n := &names{out: map[string]string{}, back: map[string]string{}}
	for _, d := range defs {
		n.add(d.Name)
	}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			n.add(c.Name)
		}
		if m.Name != "" {
			n.add(m.Name)
		}
	}
	return n
}

func (n *names) add(name string) {
	if _, ok := n.out[name]; ok {
		return
	}
	safe := name
	if !providerSafe.MatchString(name) {
		safe = strings.ReplaceAll(name, ".", "__")
		safe = providerUnsafe.ReplaceAllString(safe, "_")
		if len(safe) > 64 {
			safe = safe[:56]
		}
	}
	base := safe
	for i := 2; ; i++ {
		if _, taken := n.back[safe]; !taken {
			break
		}
		suffix := fmt.Sprintf("_%d", i)
		if len(base)+len(suffix) > 64 {
			base = base[:64-len(suffix)]
		}
		safe = base + suffix
	}
	n.out[name], n.back[safe] = safe, name
}

// provider returns the name the provider sees.
func (n *names) provider(name string) string {
	if s, ok := n.out[name]; ok {
		return s
	}
	return name
}

// ours returns the name planwright knows a provider's name by.
func (n *names) ours(name string) string {
	if s, ok := n.back[name]; ok {
		return s
	}
	return name
}
