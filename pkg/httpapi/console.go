package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed console/index.html
var consoleHTML []byte

// serveConsole serves the operator console: one static page that calls the
// API with the operator's key (kept in the browser's session storage).
func serveConsole(c echo.Context) error {
	c.Response().Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	return c.HTMLBlob(http.StatusOK, consoleHTML)
}
