package apperr_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

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

func TestProblems(t *testing.T) {
	t.Parallel()
	var none apperr.Problems
	require.NoError(t, none.Err("x"))

	var bad apperr.Problems
	n, d, neg := 0, time.Duration(0), -3
	bad.Required("Store", true)
	bad.Required("Runner", false)
	apperr.Positive(&bad, "N", &n, 7)
	apperr.Positive(&bad, "D", &d, time.Second)
	apperr.Positive(&bad, "Neg", &neg, 1)
	dur := -time.Second
	apperr.Positive(&bad, "Dur", &dur, time.Second)
	require.Equal(t, 7, n, "a zero value takes the default")
	require.Equal(t, time.Second, d)
	err := bad.Err("thing: invalid config")
	require.ErrorIs(t, err, apperr.ErrInvalid)
	require.Equal(t, []apperr.FieldError{
		{Field: "Store", Message: "is required"},
		{Field: "Neg", Message: "must be positive, got -3"},
		{Field: "Dur", Message: "must be positive, got -1s"},
	}, apperr.FieldsOf(err), "every bad value, in order")
}
