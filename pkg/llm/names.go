package llm

import (
	"fmt"
	"strings"
)

// Providers accept tool names matching ^[a-zA-Z0-9_-]{1,64}$; planwright's
// MCP tools are named "server.tool". names maps them to provider-safe names
// for one call and back. Every model call maps every tool it offers, so the
// checks are loops, not regular expressions (which took about 1 % of a
// scripted 12-step turn's server CPU).

// safeByte says whether providers accept b in a tool name.
func safeByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '_' || b == '-'
}

// providerSafe says whether providers accept name as it is.
func providerSafe(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		if !safeByte(name[i]) {
			return false
		}
	}
	return true
}

// safeChars is name with every character providers do not accept written
// "_".
func safeChars(name string) string {
	var sb strings.Builder
	sb.Grow(len(name))
	for _, r := range name {
		if r < 0x80 && safeByte(byte(r)) {
			sb.WriteByte(byte(r))
		} else {
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// SafeToolName is the provider-safe form of a tool name, before names
// makes it unique and short enough: "." becomes "__" and any other
// character providers refuse "_". A safe name is itself.
func SafeToolName(name string) string {
	if providerSafe(name) {
		return name
	}
	return safeChars(strings.ReplaceAll(name, ".", "__"))
}

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
	if !providerSafe(name) {
		safe = SafeToolName(name)
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
