package apperr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
)

func TestSentinelsMatchByCode(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("load plan: %w", apperr.New(apperr.NotFound, "plan %s not found", "p1"))
	require.ErrorIs(t, err, apperr.ErrNotFound)
	require.NotErrorIs(t, err, apperr.ErrConflict)
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	require.Equal(t, "plan p1 not found", apperr.MessageOf(err))

	// Two distinct non-sentinel errors of one code do not match each other.
	a, b := apperr.New(apperr.Conflict, "a"), apperr.New(apperr.Conflict, "b")
	require.NotErrorIs(t, a, b)
}

func TestPlainErrorsAreInternalAndHidden(t *testing.T) {
	t.Parallel()
	err := errors.New("dial tcp 10.0.0.1:5432: password=secret")
	require.Equal(t, apperr.Internal, apperr.CodeOf(err))
	require.Equal(t, "internal error", apperr.MessageOf(err))
	require.Equal(t, "internal error", apperr.MessageOf(apperr.Wrap(apperr.Internal, err, "database down")))
	require.Equal(t, apperr.Code(""), apperr.CodeOf(nil))
}

func TestInvalidListsEveryField(t *testing.T) {
	t.Parallel()
	err := apperr.Invalidf([]apperr.FieldError{
		{Field: "message", Message: "is required"},
		{Field: "plan_mode", Message: `must be one of auto_execute, draft_only, agent_review`},
	}, "invalid request")
	require.Equal(t, `invalid request: message: is required; plan_mode: must be one of auto_execute, draft_only, agent_review`, err.Error())
	require.Len(t, apperr.FieldsOf(fmt.Errorf("wrap: %w", err)), 2)
}
