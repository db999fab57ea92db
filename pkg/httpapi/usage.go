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

// UsageReader reads what model calls used (persistence.Executions
// implements it): userID's (the store's "every user" value: everyone's),
// from since until until, by day (UTC), model and user.
type UsageReader interface {
	Usage(ctx context.Context, userID string, since, until time.Time) ([]budget.UsageRow, error)
}

// UsageReport is the answer of GET /api/usage.
type UsageReport struct {
	Since time.Time         `json:"since"`
	Until time.Time         `json:"until"`
	Usage []budget.UsageRow `json:"usage"`
}

// usageHandlers serve GET /api/usage: the caller's tokens and cost by day
// and model; operators' by user too, everyone's unless user_id says whose.
type usageHandlers struct {
	deps
	store UsageReader
}

func (h *usageHandlers) get(c echo.Context) error {
	p := PrincipalOf(c)
	until := h.now().UTC()
	since := until.AddDate(0, 0, -30)
	var problems []apperr.FieldError
	for _, tf := range []struct {
		name string
		dst  *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := c.QueryParam(tf.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				problems = append(problems, apperr.FieldError{Field: tf.name, Message: "must be an RFC 3339 time"})
			}
			*tf.dst = t
		}
	}
	who := h.readerOf(p)
	if u := c.QueryParam("user_id"); u != "" {
		if p.Role != auth.RoleOperator && u != p.UserID {
			problems = append(problems, apperr.FieldError{Field: "user_id", Message: "only operators read other users' usage"})
		}
		who = u
	}
	if len(problems) > 0 {
		return apperr.Invalidf(problems, "invalid usage query")
	}
	rows, err := h.store.Usage(c.Request().Context(), who, since, until)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []budget.UsageRow{}
	}
	if p.Role != auth.RoleOperator {
		for i := range rows {
			rows[i].UserID = "" // a user's own: by day and model
		}
	}
	return c.JSON(http.StatusOK, UsageReport{Since: since, Until: until, Usage: rows})
}
