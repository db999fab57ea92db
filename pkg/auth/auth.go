// Package auth owns API keys and the principal a request acts as: keys are
// generated here, stored only as hashes, and resolved to a user and a role.
package auth

import (
	"context"
	"time"

	"github.com/planwright/planwright/pkg/budget"
)

// Role is what a principal may do.
type Role string

// Roles. Operators read and cancel every plan; users only their own.
const (
	RoleUser     Role = "user"
	RoleOperator Role = "operator"
)

// Principal is who a request acts as.
type Principal struct {
	UserID string
	Role   Role
	KeyID  string
	// Budget is the user's limits (their key's): a request may narrow
	// them, never widen them.
	Budget budget.Limits
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p, the principal its request acts as
// (set by the HTTP API's authentication).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, if any.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Key is a stored API key. The secret itself is never stored: only its
// SHA-256 hash and a short prefix to recognise it by.
type Key struct {
	ID         string
	UserID     string
	Role       Role
	Name       string
	Prefix     string
	Hash       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	// Budget is the user's limits for every run and plan of theirs
	// (narrowing the configured defaults; zero: none of their own).
	Budget budget.Limits
}

// KeyStore keeps API keys (persistence implements it): the HTTP middleware
// resolves and touches them, the keys commands create, list and revoke
// them. Package authtest has the contract every implementation passes.
type KeyStore interface {
	// CreateKey stores a new key (its hash, never its secret); k.ID is set
	// by the caller.
	CreateKey(ctx context.Context, k Key) error
	// KeyByHash returns the live (not revoked) key whose secret has the
	// given hash (HashSecret); an unknown or revoked key is apperr
	// Unauthorized.
	KeyByHash(ctx context.Context, hash string) (Key, error)
	// TouchKey records that key id was used at t.
	TouchKey(ctx context.Context, id string, at time.Time) error
	// ListKeys lists userID's keys, newest first; the store's "any user"
	// value lists every key, and an empty userID is refused.
	ListKeys(ctx context.Context, userID string) ([]Key, error)
	// RevokeKey revokes the live key with this id or printed prefix and
	// returns it: none is apperr NotFound (a revoked key too), a prefix
	// that names several keys is apperr Conflict.
	RevokeKey(ctx context.Context, idOrPrefix string) (Key, error)
	// SetKeyBudget replaces the user limits of the live key with this id
	// (zero limits: none of the user's own) and returns the key as
	// stored: none is apperr NotFound (a revoked key too). The limits are
	// checked by the caller (CheckBudget).
	SetKeyBudget(ctx context.Context, id string, limits budget.Limits) (Key, error)
}
