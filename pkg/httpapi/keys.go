package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
)

// KeyAdmin is what the operators' key routes use of auth.KeyStore
// (persistence implements it): listing keys and setting a key's user
// limits. Keys are created and revoked with `planwright keys`.
type KeyAdmin interface {
	ListKeys(ctx context.Context, userID string) ([]auth.Key, error)
	SetKeyBudget(ctx context.Context, id string, limits budget.Limits) (auth.Key, error)
}

// KeyView is an API key as operators see it: never its secret or the
// secret's hash, only the prefix it is recognised by.
type KeyView struct {
	ID         string     `json:"id"`
	Prefix     string     `json:"prefix"`
	UserID     string     `json:"user_id"`
	Role       string     `json:"role"`
	Name       string     `json:"name,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	// Budget is the user's limits through this key: every turn and plan
	// of theirs is narrowed by them (empty: none of their own).
	Budget budget.Limits `json:"budget"`
}

// KeyList is the answer of GET /api/keys: newest first.
type KeyList struct {
	Keys []KeyView `json:"keys"`
}

// KeyPatch is the body of PATCH /api/keys/{id}: the key's new user
// limits, replacing the old ones as a whole (an empty object: none).
type KeyPatch struct {
	Budget *budget.Limits `json:"budget"`
}

func keyView(k auth.Key) KeyView {
	return KeyView{ID: k.ID, Prefix: k.Prefix, UserID: k.UserID, Role: string(k.Role), Name: k.Name, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt, Budget: k.Budget}
}

// keyHandlers serve the operators' key routes (behind operatorsOnly: a
// user is told they are not found): GET /api/keys and PATCH
// /api/keys/{id}.
type keyHandlers struct {
	deps
	store KeyAdmin
}

func (h *keyHandlers) list(c echo.Context) error {
	who := h.anyUser
	if u := c.QueryParam("user_id"); u != "" {
		who = u
	}
	keys, err := h.store.ListKeys(c.Request().Context(), who)
	if err != nil {
		return err
	}
	out := KeyList{Keys: make([]KeyView, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, keyView(k))
	}
	return c.JSON(http.StatusOK, out)
}

// patch sets a key's user limits. The principal of a request is read
// from its key each time, so the user's next turn has them.
func (h *keyHandlers) patch(c echo.Context) error {
	var in KeyPatch
	if err := decode(c, &in); err != nil {
		return err
	}
	if in.Budget == nil {
		return apperr.Invalidf([]apperr.FieldError{{Field: "budget", Message: "is required"}}, "nothing to change")
	}
	if err := auth.CheckBudget(*in.Budget); err != nil {
		return err
	}
	k, err := h.store.SetKeyBudget(c.Request().Context(), c.Param("id"), *in.Budget)
	if err != nil {
		return err
	}
	h.log.Info().Ctx(c.Request().Context()).Str("key_id", k.ID).Str("key_user", k.UserID).
		Interface("budget", k.Budget).Msg("api key budget set")
	return c.JSON(http.StatusOK, keyView(k))
}
