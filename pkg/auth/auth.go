// Package auth owns API keys and the principal a request acts as: keys are
// generated here, stored only as hashes, and resolved to a user and a role.
package auth

import "time"

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
}
