package persistence

import (
	"context"
	"encoding/json"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/budget"
)

// Keys stores API keys (api_keys) — their hashes, never their secrets: it
// implements auth.KeyStore. It is safe for concurrent use.
type Keys struct{ *core }

type apiKeyRow struct {
	ID         string `gorm:"primaryKey"`
	UserID     string
	Role       string
	Name       string
	Prefix     string
	Hash       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	Budget     jsonCol
}

func (apiKeyRow) TableName() string { return "api_keys" }

func (r apiKeyRow) key() auth.Key {
	k := auth.Key{ID: r.ID, UserID: r.UserID, Role: auth.Role(r.Role), Name: r.Name, Prefix: r.Prefix,
		Hash: r.Hash, CreatedAt: r.CreatedAt.UTC(), LastUsedAt: utcPtr(r.LastUsedAt), RevokedAt: utcPtr(r.RevokedAt)}
	if len(r.Budget) > 0 {
		_ = json.Unmarshal(r.Budget, &k.Budget) // written by CreateKey
	}
	return k
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// CreateKey stores a new API key (its hash, never its secret).
func (s *Keys) CreateKey(ctx context.Context, k auth.Key) error {
	row := apiKeyRow{ID: k.ID, UserID: k.UserID, Role: string(k.Role), Name: k.Name, Prefix: k.Prefix, Hash: k.Hash,
		CreatedAt: Timestamp(k.CreatedAt), LastUsedAt: stampPtr(k.LastUsedAt), RevokedAt: stampPtr(k.RevokedAt), Budget: mustJSON(k.Budget)}
	if row.CreatedAt.IsZero() {
		row.CreatedAt = s.stamp()
	}
	return dbErr("create api key", s.insert(ctx, &row))
}

// KeyByHash returns the live (not revoked) key with the given secret hash.
func (s *Keys) KeyByHash(ctx context.Context, hash string) (auth.Key, error) {
	var row apiKeyRow
	err := s.do(ctx, func(g *gorm.DB) error { return g.Where("hash = ? AND revoked_at IS NULL", hash).Take(&row).Error })
	if err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return auth.Key{}, apperr.New(apperr.Unauthorized, "unknown or revoked API key")
		}
		return auth.Key{}, dbErr("find api key", err)
	}
	return row.key(), nil
}

// TouchKey records that a key was used at t.
func (s *Keys) TouchKey(ctx context.Context, id string, t time.Time) error {
	_, err := s.update(ctx, func(g *gorm.DB) *gorm.DB {
		return g.Model(&apiKeyRow{}).Where("id = ?", id).Update("last_used_at", Timestamp(t))
	})
	return dbErr("touch api key", err)
}

// ListKeys lists the keys of userID (AnyUser: every key), newest first.
func (s *Keys) ListKeys(ctx context.Context, userID string) ([]auth.Key, error) {
	q, err := scopeUser(s.g.WithContext(ctx), "user_id", userID)
	if err != nil {
		return nil, err
	}
	var rows []apiKeyRow
	if err := q.Order("created_at DESC, id DESC").Find(&rows).Error; err != nil {
		return nil, dbErr("list api keys", err)
	}
	out := make([]auth.Key, len(rows))
	for i, r := range rows {
		out[i] = r.key()
	}
	return out, nil
}

// RevokeKey revokes a key by id or by its printed prefix. Revoking a revoked
// key is NotFound.
func (s *Keys) RevokeKey(ctx context.Context, idOrPrefix string) (auth.Key, error) {
	var row apiKeyRow
	err := s.transact(ctx, func(tx *gorm.DB) error {
		q := tx.Where("revoked_at IS NULL")
		if validID(idOrPrefix) {
			q = q.Where("id = ?", idOrPrefix)
		} else {
			q = q.Where("prefix = ?", idOrPrefix)
		}
		var rows []apiKeyRow
		if err := q.Limit(2).Find(&rows).Error; err != nil {
			return err
		}
		switch len(rows) {
		case 0:
			return notFound("api key", idOrPrefix)
		case 2:
			return apperr.New(apperr.Conflict, "prefix %s names more than one key; revoke by id", idOrPrefix)
		}
		row = rows[0]
		at := s.stamp()
		row.RevokedAt = &at
		return tx.Model(&apiKeyRow{}).Where("id = ?", row.ID).Update("revoked_at", at).Error
	})
	if err != nil {
		return auth.Key{}, dbErr("revoke api key", err)
	}
	return row.key(), nil
}

// SetKeyBudget replaces the user limits of the live key with this id.
func (s *Keys) SetKeyBudget(ctx context.Context, id string, limits budget.Limits) (auth.Key, error) {
	if !validID(id) {
		return auth.Key{}, notFound("api key", id)
	}
	var row apiKeyRow
	err := s.transact(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("id = ? AND revoked_at IS NULL", id).Take(&row).Error; err != nil {
			return err
		}
		row.Budget = mustJSON(limits)
		return tx.Model(&apiKeyRow{}).Where("id = ?", id).Update("budget", row.Budget).Error
	})
	if err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return auth.Key{}, notFound("api key", id)
		}
		return auth.Key{}, dbErr("set api key budget", err)
	}
	return row.key(), nil
}
