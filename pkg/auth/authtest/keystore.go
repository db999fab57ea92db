// Package authtest holds the contract of auth.KeyStore: KeyStoreSuite is the
// behaviour every implementation must show, run by the implementation's own
// tests (persistence runs it on SQLite and PostgreSQL). It tests the
// interface only; it imports no implementation.
package authtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/apperr/apperrtest"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
)

// KeyStoreSuite runs the contract of auth.KeyStore. newStore returns an
// empty store for one case (cases run in parallel); anyUser is the
// implementation's "every user" value for ListKeys.
func KeyStoreSuite(t *testing.T, newStore func(t *testing.T) auth.KeyStore, anyUser string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s auth.KeyStore, anyUser string)
	}{
		{"a key is found by its secret's hash until revoked", keyLifecycle},
		{"ListKeys lists a user's keys, or every key", listKeys},
		{"RevokeKey by an ambiguous prefix is a Conflict", ambiguousPrefix},
		{"SetKeyBudget replaces a live key's limits", keyBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t), anyUser)
		})
	}
}

// newKey stores a new key of user and returns its secret and the key.
func newKey(t *testing.T, s auth.KeyStore, user string, role auth.Role) (string, auth.Key) {
	t.Helper()
	secret, key, err := auth.NewKey(auth.KeySpec{UserID: user, Role: role, Name: "ci"}, uuid.Must(uuid.NewV7()).String(), time.Now())
	require.NoError(t, err)
	require.NoError(t, s.CreateKey(context.Background(), key))
	return secret, key
}

func keyLifecycle(t *testing.T, s auth.KeyStore, _ string) {
	ctx := context.Background()
	secret, key := newKey(t, s, "alice", auth.RoleOperator)
	newKey(t, s, "bob", auth.RoleUser)

	got, err := s.KeyByHash(ctx, auth.HashSecret(secret))
	require.NoError(t, err)
	require.Equal(t, key.ID, got.ID)
	require.Equal(t, "alice", got.UserID)
	require.Equal(t, auth.RoleOperator, got.Role)
	require.Equal(t, key.Prefix, got.Prefix)
	require.Nil(t, got.LastUsedAt)

	_, err = s.KeyByHash(ctx, auth.HashSecret("pwk_nope"))
	apperrtest.RequireCode(t, err, apperr.Unauthorized)

	used := time.Now()
	require.NoError(t, s.TouchKey(ctx, key.ID, used))
	got, err = s.KeyByHash(ctx, auth.HashSecret(secret))
	require.NoError(t, err)
	require.NotNil(t, got.LastUsedAt)
	require.WithinDuration(t, used, *got.LastUsedAt, time.Millisecond)

	revoked, err := s.RevokeKey(ctx, key.Prefix)
	require.NoError(t, err)
	require.Equal(t, key.ID, revoked.ID)
	require.NotNil(t, revoked.RevokedAt)
	_, err = s.KeyByHash(ctx, auth.HashSecret(secret))
	apperrtest.RequireCode(t, err, apperr.Unauthorized)
	_, err = s.RevokeKey(ctx, key.ID)
	apperrtest.RequireCode(t, err, apperr.NotFound)
	_, err = s.RevokeKey(ctx, "pwk_unknown")
	apperrtest.RequireCode(t, err, apperr.NotFound)
}

func listKeys(t *testing.T, s auth.KeyStore, anyUser string) {
	ctx := context.Background()
	_, first := newKey(t, s, "alice", auth.RoleOperator)
	_, second := newKey(t, s, "alice", auth.RoleUser)
	newKey(t, s, "bob", auth.RoleUser)

	mine, err := s.ListKeys(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, mine, 2)
	require.ElementsMatch(t, []string{first.ID, second.ID}, []string{mine[0].ID, mine[1].ID})
	all, err := s.ListKeys(ctx, anyUser)
	require.NoError(t, err)
	require.Len(t, all, 3)
	_, err = s.ListKeys(ctx, "")
	require.Error(t, err, "an empty user must never list everything")

	_, err = s.RevokeKey(ctx, second.ID)
	require.NoError(t, err)
	mine, err = s.ListKeys(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, mine, 2, "revoked keys are listed")
}

func ambiguousPrefix(t *testing.T, s auth.KeyStore, _ string) {
	ctx := context.Background()
	_, a := newKey(t, s, "alice", auth.RoleUser)
	_, b := newKey(t, s, "bob", auth.RoleUser)
	// Two keys made to share a prefix (a prefix is short: it can collide).
	b.ID, b.Hash, b.Prefix = uuid.Must(uuid.NewV7()).String(), b.Hash+"x", a.Prefix
	require.NoError(t, s.CreateKey(ctx, b))
	_, err := s.RevokeKey(ctx, a.Prefix)
	apperrtest.RequireCode(t, err, apperr.Conflict)
	_, err = s.RevokeKey(ctx, a.ID)
	require.NoError(t, err, "revoking by id is always possible")
}

func keyBudget(t *testing.T, s auth.KeyStore, _ string) {
	ctx := context.Background()
	secret, key := newKey(t, s, "alice", auth.RoleUser)
	_, other := newKey(t, s, "bob", auth.RoleUser)
	limits := budget.Limits{TotalTokens: 5000, WallTime: budget.Duration(10 * time.Minute), CostUSD: 2.5}
	got, err := s.SetKeyBudget(ctx, key.ID, limits)
	require.NoError(t, err)
	require.Equal(t, key.ID, got.ID)
	require.Equal(t, limits, got.Budget, "the key as stored")
	found, err := s.KeyByHash(ctx, auth.HashSecret(secret))
	require.NoError(t, err)
	require.Equal(t, limits, found.Budget, "the next request's principal has the new limits")
	keys, err := s.ListKeys(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, other.ID, keys[0].ID)
	require.True(t, keys[0].Budget.IsZero(), "another key is left alone")

	got, err = s.SetKeyBudget(ctx, key.ID, budget.Limits{})
	require.NoError(t, err)
	require.True(t, got.Budget.IsZero(), "zero limits clear the user's own")

	_, err = s.SetKeyBudget(ctx, uuid.Must(uuid.NewV7()).String(), limits)
	apperrtest.RequireCode(t, err, apperr.NotFound)
	_, err = s.SetKeyBudget(ctx, key.Prefix, limits)
	apperrtest.RequireCode(t, err, apperr.NotFound) // by id only
	_, err = s.RevokeKey(ctx, key.ID)
	require.NoError(t, err)
	_, err = s.SetKeyBudget(ctx, key.ID, limits)
	apperrtest.RequireCode(t, err, apperr.NotFound) // a revoked key
}
