package config

import (
	"fmt"
	"net/url"
	"strings"
)

// serverEdge checks what the server refuses at its edge: the watch stream
// limit, the allowed hosts (names, without scheme or port) and the allowed
// origins (scheme://host[:port], nothing more).
func (v *validator) serverEdge(s Server) {
	v.countIn("server.max_watch_streams_per_user", int64(s.MaxWatchStreamsPerUser), 1, 10_000)
	for i, h := range s.AllowedHosts {
		if h == "*" {
			continue
		}
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, "/:@*? ") {
			v.add(fmt.Sprintf("server.allowed_hosts[%d]", i), fmt.Sprintf("%q is not a host name (no scheme, port or path; \"*\" for any)", h))
		}
	}
	for i, o := range s.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			v.add(fmt.Sprintf("server.allowed_origins[%d]", i), fmt.Sprintf("%q is not an origin (http:// or https://host[:port])", o))
		}
	}
}
