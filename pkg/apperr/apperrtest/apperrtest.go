// Package apperrtest has the assertions tests make about apperr errors.
package apperrtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
)

// RequireCode fails the test unless err is an error of code.
func RequireCode(t testing.TB, err error, code apperr.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "error: %v", err)
}
