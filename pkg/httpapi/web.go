package httpapi

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
)

// webFiles is the web app: plain HTML, CSS and JavaScript modules, served
// as they are in the repository (no build step), so `make run` needs only Go.
//
//go:embed web
var webFiles embed.FS

// webCSP allows only the app's own files and calls to its own origin: no
// inline script or style, nothing from elsewhere.
const webCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// WebFS returns the embedded web app's files (index.html and favicon.ico
// at the root, the rest under app/), for tests.
func WebFS() fs.FS {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}

// webRoutes serves the web app: GET / is index.html, GET /app/{path} the
// modules and styles it loads, GET /favicon.ico its icon.
func webRoutes(e *echo.Echo) {
	files := WebFS()
	serve := func(c echo.Context, name string) error {
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return apperr.New(apperr.NotFound, "no such file: /%s", name)
		}
		h := c.Response().Header()
		h.Set("Content-Security-Policy", webCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary: revalidate every time.
		h.Set("Cache-Control", "no-cache")
		ctype := mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) {
		case ".js":
			ctype = "text/javascript; charset=utf-8" // modules need a JavaScript type whatever the system's mime table says
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".ico":
			ctype = "image/vnd.microsoft.icon"
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		return c.Blob(http.StatusOK, ctype, data)
	}
	e.GET("/", func(c echo.Context) error { return serve(c, "index.html") })
	// Where browsers look for a site's icon when a page names none.
	e.GET("/favicon.ico", func(c echo.Context) error { return serve(c, "favicon.ico") })
	e.GET("/app/*", func(c echo.Context) error {
		name := path.Clean("/" + c.Param("*"))
		if strings.Contains(name, "..") || name == "/" {
			return apperr.New(apperr.NotFound, "no such file: /app%s", name)
		}
		return serve(c, "app"+name)
	})
}
