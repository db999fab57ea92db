package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/budget"
)

// SecretPrefix starts every API key, so a leaked key is recognisable.
const SecretPrefix = "pwk_"

const (
	secretChars  = 40
	alphabet     = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	displayChars = len(SecretPrefix) + 8
)

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleUser, RoleOperator:
		return r, nil
	}
	return "", apperr.New(apperr.Invalid, "unknown role %q (want user or operator)", s)
}

// KeySpec describes a key to create.
type KeySpec struct {
	UserID string
	Role   Role
	Name   string
	// Budget is the user's limits (Key.Budget).
	Budget budget.Limits
}

// NewKey generates a key for spec. It returns the secret, to be shown once,
// and the record to store, which holds only the secret's hash and prefix.
func NewKey(spec KeySpec, id string, now time.Time) (secret string, key Key, err error) {
	var problems []apperr.FieldError
	if strings.TrimSpace(spec.UserID) == "" {
		problems = append(problems, apperr.FieldError{Field: "user", Message: "is required"})
	}
	if _, err := ParseRole(string(spec.Role)); err != nil {
		problems = append(problems, apperr.FieldError{Field: "role", Message: apperr.MessageOf(err)})
	}
	problems = append(problems, spec.Budget.Check("budget")...)
	if len(problems) > 0 {
		return "", Key{}, apperr.Invalidf(problems, "invalid key")
	}
	var b strings.Builder
	b.WriteString(SecretPrefix)
	max := big.NewInt(int64(len(alphabet)))
	for range secretChars {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", Key{}, fmt.Errorf("auth: generate key: %w", err)
		}
		b.WriteByte(alphabet[n.Int64()])
	}
	secret = b.String()
	return secret, Key{
		ID:        id,
		UserID:    spec.UserID,
		Role:      spec.Role,
		Budget:    spec.Budget,
		Name:      spec.Name,
		Prefix:    secret[:displayChars],
		Hash:      HashSecret(secret),
		CreatedAt: now.UTC(),
	}, nil
}

// CheckBudget checks a key's user limits: an apperr Invalid error naming
// each bad one under "budget" (budget.model_calls).
func CheckBudget(limits budget.Limits) error {
	if probs := limits.Check("budget"); len(probs) > 0 {
		return apperr.Invalidf(probs, "invalid budget")
	}
	return nil
}

// HashSecret returns the hex SHA-256 of a key secret: what is stored and
// looked up. API keys carry 238 bits of entropy, so a fast hash is enough.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// BearerSecret extracts the secret of an `Authorization: Bearer <key>`
// header value. It returns an Unauthorized error when there is none.
func BearerSecret(header string) (string, error) {
	scheme, secret, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return "", apperr.New(apperr.Unauthorized, "missing bearer API key")
	}
	return strings.TrimSpace(secret), nil
}

// SameHash compares two hashes in constant time.
func SameHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
