package persistence

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
)

func TestTransientErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err             error
		transient, lost bool
	}{
		{&pgconn.PgError{Code: "40001"}, true, false}, // serialization failure
		{&pgconn.PgError{Code: "40P01"}, true, false}, // deadlock
		{&pgconn.PgError{Code: "57P01"}, true, true},  // pg_terminate_backend
		{&pgconn.PgError{Code: "08006"}, true, true},  // connection failure
		{&pgconn.PgError{Code: "23505"}, false, false},
		{&pgconn.PgError{Code: "42P01"}, false, false},
		{fmt.Errorf("query: %w", driver.ErrBadConn), true, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, true},
		{errors.New("conn closed"), true, true},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), true, false},
		{apperr.Wrap(apperr.Internal, &pgconn.PgError{Code: "57P01"}, "get plan"), true, true},
		{context.Canceled, false, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false, false},
		{errors.New("syntax error"), false, false},
	} {
		require.Equal(t, tc.transient, transient(tc.err), "%v", tc.err)
		require.Equal(t, tc.lost, connectionLost(tc.err), "%v", tc.err)
	}
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(dbErr("x", &pgconn.PgError{Code: "57P01"})))
	require.Equal(t, apperr.Internal, apperr.CodeOf(dbErr("x", errors.New("syntax error"))))
}
