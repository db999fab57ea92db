package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
)

// edge is what the server refuses before any handler sees a request, so
// that a web page the user visits cannot drive a server on the user's
// machine (or behind their firewall):
//
//   - a Host the server does not serve (421): a page whose own name was
//     made to resolve to this server (DNS rebinding) sends its own name;
//   - a cross-origin request (403) from an origin not in AllowedOrigins: a
//     page elsewhere sends its Origin, and an allowed one gets the CORS
//     headers (and its preflight an answer).
//
// A body that is not application/json is refused where bodies are read
// (decode, 415): a cross-origin form or text/plain POST needs no
// preflight, a JSON one does.
type edge struct {
	// hosts are the names served besides loopback names and IP addresses;
	// any says every host is.
	hosts map[string]bool
	any   bool
	// origins are the allowed cross origins, canonical (see originOf).
	origins map[string]bool
}

// Headers a cross-origin client may send and read, and how long a browser
// may keep a preflight's answer.
const (
	corsAllowHeaders  = "Authorization, Content-Type, Last-Event-ID, X-Request-ID, Mcp-Protocol-Version"
	corsExposeHeaders = "Retry-After, X-Request-ID"
	corsMaxAge        = "600"
)

// newEdge builds the edge of a server listening on addr (its host is
// served when it is a name), serving allowedHosts too ("*": any host) and
// answering the cross origins allowedOrigins. The error names every bad
// entry.
func newEdge(addr string, allowedHosts, allowedOrigins []string) (*edge, error) {
	e := &edge{hosts: map[string]bool{}, origins: map[string]bool{}}
	var bad []string
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		e.hosts[canonicalHost(host)] = true
	}
	for _, h := range allowedHosts {
		switch name := canonicalHost(strings.TrimSpace(h)); {
		case h == "*":
			e.any = true
		case name == "" || strings.ContainsAny(name, "/:@*? "):
			bad = append(bad, fmt.Sprintf("AllowedHosts: %q is not a host name (no scheme, port or path)", h))
		default:
			e.hosts[name] = true
		}
	}
	for _, o := range allowedOrigins {
		canon, err := parseOrigin(strings.TrimSpace(o))
		if err != nil {
			bad = append(bad, fmt.Sprintf("AllowedOrigins: %q %v", o, err))
			continue
		}
		e.origins[canon] = true
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("httpapi: %s", strings.Join(bad, "; "))
	}
	return e, nil
}

// check is the middleware: Host, then Origin (with CORS).
func (e *edge) check(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if !e.serves(req.Host) {
			return apperr.New(apperr.Misdirected, "this server does not serve host %q; list it in server.allowed_hosts to serve it", hostOnly(req.Host))
		}
		if preflight, err := e.crossOrigin(c); err != nil || preflight {
			return err
		}
		return next(c)
	}
}

// serves reports whether host (a Host header, with or without a port) is
// served: any IP address (a page cannot rebind a name to what is already
// an address, and probes call a replica by its address), localhost and
// its subdomains, the listen address's name and the allowed hosts. An
// empty Host (HTTP/1.0) names nothing to rebind.
func (e *edge) serves(host string) bool {
	name := canonicalHost(hostOnly(host))
	switch {
	case e.any || name == "":
		return true
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return true
	case net.ParseIP(strings.Split(name, "%")[0]) != nil:
		return true
	}
	return e.hosts[name]
}

// crossOrigin checks a request's Origin. The server's own origin (the
// request's Host, over http or https) and no Origin at all pass (an unsafe
// method without Origin but marked cross-site by the browser does not); an
// allowed origin passes with the CORS headers, and its preflight is
// answered here (preflight true); any other is a Forbidden.
func (e *edge) crossOrigin(c echo.Context) (preflight bool, err error) {
	req := c.Request()
	origin := req.Header.Get(echo.HeaderOrigin)
	if origin == "" {
		if req.Header.Get("Sec-Fetch-Site") == "cross-site" && !safeMethod(req.Method) {
			return false, apperr.New(apperr.Forbidden, "cross-site request refused")
		}
		return false, nil
	}
	canon, perr := parseOrigin(origin)
	if perr == nil && canon == originOf(strings.SplitN(canon, "://", 2)[0], req.Host) {
		return false, nil
	}
	if perr != nil || !e.origins[canon] {
		return false, apperr.New(apperr.Forbidden,
			"cross-origin request from %q refused; list the origin in server.allowed_origins to allow it", origin)
	}
	h := c.Response().Header()
	h.Add(echo.HeaderVary, echo.HeaderOrigin)
	h.Set(echo.HeaderAccessControlAllowOrigin, origin)
	h.Set(echo.HeaderAccessControlExposeHeaders, corsExposeHeaders)
	if req.Method != http.MethodOptions || req.Header.Get(echo.HeaderAccessControlRequestMethod) == "" {
		return false, nil
	}
	h.Set(echo.HeaderAccessControlAllowMethods, "GET, POST, PATCH")
	h.Set(echo.HeaderAccessControlAllowHeaders, corsAllowHeaders)
	h.Set(echo.HeaderAccessControlMaxAge, corsMaxAge)
	return true, c.NoContent(http.StatusNoContent)
}

// parseOrigin returns the canonical form of an origin (scheme://host with
// the scheme's default port left out), or why it is not one: "null" and
// anything with a path, query or user are not.
func parseOrigin(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return "", fmt.Errorf("is not an origin (http or https://host[:port])")
	}
	return originOf(u.Scheme, u.Host), nil
}

// originOf is the canonical origin of scheme and host (a host[:port]).
func originOf(scheme, host string) string {
	name, port := hostOnly(host), ""
	if _, p, err := net.SplitHostPort(host); err == nil {
		port = p
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	name = canonicalHost(name)
	if strings.Contains(name, ":") {
		name = "[" + name + "]"
	}
	if port != "" {
		name += ":" + port
	}
	return scheme + "://" + name
}

// hostOnly is host without its port (and an IPv6 address without its
// brackets).
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}

// canonicalHost compares host names: lower case, without a final dot.
func canonicalHost(name string) string {
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

func safeMethod(m string) bool {
	return slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodOptions}, m)
}
