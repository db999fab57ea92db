package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
)

func TestNewKeyStoresOnlyTheHash(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("x", 3600))
	secret, key, err := auth.NewKey(auth.KeySpec{UserID: "alice", Role: auth.RoleOperator, Name: "laptop"}, "k1", now)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, auth.SecretPrefix))
	require.Len(t, secret, len(auth.SecretPrefix)+40)
	require.Equal(t, auth.HashSecret(secret), key.Hash)
	require.NotContains(t, key.Hash, secret)
	require.True(t, strings.HasPrefix(secret, key.Prefix))
	require.Less(t, len(key.Prefix), len(secret)/2, "the prefix must not reveal the key")
	require.Equal(t, now.UTC(), key.CreatedAt)
	require.Equal(t, auth.Key{ID: "k1", UserID: "alice", Role: auth.RoleOperator, Name: "laptop", Prefix: key.Prefix, Hash: key.Hash, CreatedAt: now.UTC()}, key)

	other, _, err := auth.NewKey(auth.KeySpec{UserID: "alice", Role: auth.RoleUser}, "k2", now)
	require.NoError(t, err)
	require.NotEqual(t, secret, other)
}

func TestNewKeyRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	_, _, err := auth.NewKey(auth.KeySpec{Role: "admin"}, "k", time.Now())
	require.ErrorIs(t, err, apperr.ErrInvalid)
	fields := apperr.FieldsOf(err)
	require.Len(t, fields, 2)
	require.Equal(t, "user", fields[0].Field)
	require.Equal(t, "role", fields[1].Field)
}

func TestBearerSecret(t *testing.T) {
	t.Parallel()
	cases := []struct {
		header, want string
		ok           bool
	}{
		{"Bearer pwk_abc", "pwk_abc", true},
		{"bearer   pwk_abc  ", "pwk_abc", true},
		{"", "", false},
		{"Basic dXNlcjpwdw==", "", false},
		{"Bearer", "", false},
		{"Bearer    ", "", false},
	}
	for _, c := range cases {
		got, err := auth.BearerSecret(c.header)
		if !c.ok {
			require.ErrorIs(t, err, apperr.ErrUnauthorized, c.header)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.want, got)
	}
	require.True(t, auth.SameHash(auth.HashSecret("x"), auth.HashSecret("x")))
	require.False(t, auth.SameHash(auth.HashSecret("x"), auth.HashSecret("y")))
}
