package httpapi

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/logctx"
)

// Auth modes.
const (
	AuthNone   = "none"   // a single local user; loopback only (config enforces it)
	AuthAPIKey = "apikey" // Authorization: Bearer <key>
)

// KeyResolver finds a live API key by its secret's hash: the part of
// auth.KeyStore the middleware uses (persistence implements it).
type KeyResolver interface {
	KeyByHash(ctx context.Context, hash string) (auth.Key, error)
	TouchKey(ctx context.Context, id string, at time.Time) error
}

// AuthConfig configures authentication of the /api routes.
type AuthConfig struct {
	// Mode is AuthNone or AuthAPIKey.
	Mode string
	// Keys resolves API keys; required in AuthAPIKey mode.
	Keys KeyResolver
	// LocalUser is the user of AuthNone mode (default "local"); it acts as
	// an operator.
	LocalUser string
	Now       func() time.Time
	Logger    zerolog.Logger
}

// PrincipalOf returns the principal an authenticated request acts as.
func PrincipalOf(c echo.Context) auth.Principal {
	p, _ := c.Get("principal").(auth.Principal)
	return p
}

// PrincipalFromContext returns the principal stored in a request context.
func PrincipalFromContext(ctx context.Context) (auth.Principal, bool) {
	return auth.PrincipalFrom(ctx)
}

// authenticator returns the middleware that resolves the caller, or nil
// after recording what is wrong with cfg in bad (fields under "Auth.").
func authenticator(cfg AuthConfig, bad *apperr.Problems) echo.MiddlewareFunc {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LocalUser == "" {
		cfg.LocalUser = "local"
	}
	switch cfg.Mode {
	case AuthNone:
		p := auth.Principal{UserID: cfg.LocalUser, Role: auth.RoleOperator}
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error { return next(withPrincipal(c, p)) }
		}
	case AuthAPIKey:
		if cfg.Keys == nil {
			bad.Add("Auth.Keys", "is required in %s mode", AuthAPIKey)
			return nil
		}
	default:
		bad.Add("Auth.Mode", "%q is not %s or %s", cfg.Mode, AuthNone, AuthAPIKey)
		return nil
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			secret, err := auth.BearerSecret(c.Request().Header.Get(echo.HeaderAuthorization))
			if err != nil {
				return apperr.New(apperr.Unauthorized, "missing or malformed Authorization: Bearer <api key>")
			}
			key, err := cfg.Keys.KeyByHash(c.Request().Context(), auth.HashSecret(secret))
			if err != nil {
				if apperr.CodeOf(err) == apperr.Unauthorized {
					return apperr.New(apperr.Unauthorized, "unknown or revoked API key")
				}
				return err
			}
			if err := cfg.Keys.TouchKey(c.Request().Context(), key.ID, cfg.Now()); err != nil {
				cfg.Logger.Warn().Err(err).Str("key_id", key.ID).Msg("record api key use")
			}
			return next(withPrincipal(c, auth.Principal{UserID: key.UserID, Role: key.Role, KeyID: key.ID, Budget: key.Budget}))
		}
	}
}

// operatorsOnly lets only operators through; anyone else is told the route
// is not found (what a caller cannot see is a 404, not a 403).
func operatorsOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if PrincipalOf(c).Role != auth.RoleOperator {
			return apperr.New(apperr.NotFound, "%s is for operators only", c.Path())
		}
		return next(c)
	}
}

func withPrincipal(c echo.Context, p auth.Principal) echo.Context {
	c.Set("principal", p)
	req := c.Request()
	c.SetRequest(req.WithContext(logctx.With(auth.WithPrincipal(req.Context(), p), "user", p.UserID)))
	return c
}
