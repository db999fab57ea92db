package httpapi

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// routeMissing answers a request under a route group that matches none of
// the group's routes. Echo's router answers a wrong method with 405 itself,
// except inside a group with middleware: there the group's catch-all (which
// makes the middleware, such as authentication, run first) turns it into a
// 404. routeMissing restores the 405 with its Allow header when the path is
// served for other methods, answers OPTIONS like echo does (204 with Allow),
// and is a 404 otherwise.
func routeMissing(c echo.Context) error {
	req := c.Request()
	allowed := allowedMethods(c.Echo().Routes(), req.URL.Path)
	if len(allowed) == 0 {
		return echo.ErrNotFound
	}
	allow := http.MethodOptions + ", " + strings.Join(allowed, ", ")
	c.Response().Header().Set(echo.HeaderAllow, allow)
	if req.Method == http.MethodOptions {
		return c.NoContent(http.StatusNoContent)
	}
	return echo.NewHTTPError(http.StatusMethodNotAllowed,
		fmt.Sprintf("%s is not allowed on %s; allowed: %s", req.Method, req.URL.Path, strings.Join(allowed, ", ")))
}

// allowedMethods lists, sorted, the methods of the routes whose pattern
// matches path.
func allowedMethods(routes []*echo.Route, path string) []string {
	var out []string
	for _, r := range routes {
		if r.Method == echo.RouteNotFound || slices.Contains(out, r.Method) {
			continue
		}
		if routeMatches(r.Path, path) {
			out = append(out, r.Method)
		}
	}
	slices.Sort(out)
	return out
}

// routeMatches reports whether an echo route pattern matches path: static
// segments equal, a :param matches one non-empty segment, a trailing *
// matches the rest.
func routeMatches(pattern, path string) bool {
	ps, ss := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, p := range ps {
		if p == "*" && i == len(ps)-1 {
			return true
		}
		if i >= len(ss) {
			return false
		}
		switch {
		case strings.HasPrefix(p, ":"):
			if ss[i] == "" {
				return false
			}
		case p != ss[i]:
			return false
		}
	}
	return len(ps) == len(ss)
}
