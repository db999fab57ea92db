package persistence

import (
	"context"
	"database/sql/driver"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
)

// AnyUser, passed where a method takes the caller's user id, lifts the
// ownership filter. Only operators' requests and internal work use it; an
// empty user id is refused so that a missing principal never reads
// everything.
const AnyUser = "\x00any-user"

// StoreConfig configures the stores (NewStores).
type StoreConfig struct {
	// Now stamps rows; defaults to time.Now.
	Now func() time.Time
	// NewID makes row ids; defaults to UUIDv7.
	NewID func() string
	// Retry says how transient database errors are retried (see do); its
	// zero fields take the defaults, negative ones are refused.
	Retry RetryPolicy
}

// core is what every store shares: the database, its gorm handle, the
// clock, the id generator and the retry policy, with the helpers every
// statement runs through (do, insert, update, transact: retry.go). The
// stores NewStores returns share one core; a core over one transaction
// (inTransaction) does not retry its statements alone.
type core struct {
	db    *DB
	g     *gorm.DB
	now   func() time.Time
	newID func() string
	retry RetryPolicy
	inTx  bool // a core over one transaction: its statements are not retried alone
}

// newCore validates cfg, fills in its defaults and returns a core over an
// open, migrated database.
func newCore(db *DB, cfg StoreConfig) (*core, error) {
	var bad apperr.Problems
	bad.Required("db", db == nil)
	if cfg.Retry.Attempts < 0 {
		bad.Add("Retry.Attempts", "must not be negative, got %d", cfg.Retry.Attempts)
	}
	if cfg.Retry.Backoff < 0 {
		bad.Add("Retry.Backoff", "must not be negative, got %v", cfg.Retry.Backoff)
	}
	if cfg.Retry.MaxBackoff < 0 {
		bad.Add("Retry.MaxBackoff", "must not be negative, got %v", cfg.Retry.MaxBackoff)
	}
	if err := bad.Err("persistence: invalid store config"); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = NewID
	}
	return &core{db: db, g: db.Gorm(), now: cfg.Now, newID: cfg.NewID, retry: cfg.Retry.withDefaults()}, nil
}

// NewID returns a new UUIDv7 string: time-ordered, so rows inserted together
// sort together.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// stamp is the store's clock in UTC at the database's precision
// (microseconds), so a time read back equals the time written.
func (c *core) stamp() time.Time { return Timestamp(c.now()) }

// Timestamp normalises t as stored: UTC, microsecond precision.
func Timestamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func stampPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := Timestamp(*t)
	return &v
}

// validID reports whether id can name a row. Ids are UUIDs; anything else
// cannot exist, so lookups by malformed ids are not found without a query.
func validID(id string) bool {
	_, err := uuid.Parse(id)
	return err == nil && len(id) == 36
}

// scopeUser filters q to userID's rows unless userID is AnyUser.
func scopeUser(q *gorm.DB, column, userID string) (*gorm.DB, error) {
	switch userID {
	case AnyUser:
		return q, nil
	case "":
		return nil, apperr.New(apperr.Internal, "persistence: query without a user")
	}
	return q.Where(column+" = ?", userID), nil
}

// notFound is the error for a missing (or not the caller's) row.
func notFound(what, id string) error {
	return apperr.New(apperr.NotFound, "%s %s not found", what, id)
}

// dbErr maps a database error into the apperr vocabulary: a missing row is
// NotFound, a unique violation Conflict, a cancelled context itself, a
// transient failure that outlived its retries Unavailable, and anything
// else Internal wrapping the cause.
func dbErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, gorm.ErrRecordNotFound):
		return apperr.Wrap(apperr.NotFound, err, "%s: not found", op)
	case isUniqueViolation(err):
		return apperr.Wrap(apperr.Conflict, err, "%s: already exists", op)
	}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		if ae.Code == apperr.Internal && transient(err) {
			return apperr.Wrap(apperr.Unavailable, err, "persistence: %s: the database is unavailable", op)
		}
		return err
	}
	if transient(err) {
		return apperr.Wrap(apperr.Unavailable, err, "persistence: %s: the database is unavailable", op)
	}
	return apperr.Wrap(apperr.Internal, err, "persistence: %s", op)
}

func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505")
}

// jsonCol is a JSON column: jsonb on PostgreSQL, text on SQLite. It is
// written as a string so both drivers accept it, and read back from either
// representation.
type jsonCol []byte

// Value implements driver.Valuer.
func (j jsonCol) Value() (driver.Value, error) {
	if len(j) == 0 {
		return nil, nil
	}
	return string(j), nil
}

// Scan implements sql.Scanner.
func (j *jsonCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*j = nil
	case []byte:
		*j = append((*j)[:0], v...)
	case string:
		*j = jsonCol(v)
	default:
		return fmt.Errorf("persistence: cannot scan %T into a JSON column", src)
	}
	return nil
}

func mustJSON(v any) jsonCol {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("persistence: marshal %T: %v", v, err)) // only called with plain data types
	}
	return b
}

func fromJSON[T any](j jsonCol) T {
	var v T
	if len(j) > 0 {
		_ = json.Unmarshal(j, &v) // written by this package; a bad value reads as zero
	}
	return v
}

// Page asks for one page of a list, newest first.
type Page struct {
	// Limit is the page size; 0 means 50, and it is capped at 200.
	Limit int
	// Cursor is the previous page's NextCursor; empty for the first page.
	Cursor string
}

const (
	defaultPageSize = 50
	maxPageSize     = 200
)

func (p Page) size() int {
	switch {
	case p.Limit <= 0:
		return defaultPageSize
	case p.Limit > maxPageSize:
		return maxPageSize
	}
	return p.Limit
}

// cursor is the position after the last row of a page: rows are ordered by
// (time, id) descending, both stable.
type cursor struct {
	At time.Time `json:"t"`
	ID string    `json:"i"`
}

func encodeCursor(at time.Time, id string) string {
	b, _ := json.Marshal(cursor{At: at.UTC(), ID: id})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID == "" {
		return cursor{}, apperr.Invalidf([]apperr.FieldError{{Field: "cursor", Message: "is not a cursor this service issued"}}, "invalid cursor")
	}
	return c, nil
}

// paginate applies p's cursor and limit to q ordered by (column, id)
// descending, fetching one extra row to know whether a next page exists.
func paginate(q *gorm.DB, table, column string, p Page) (*gorm.DB, error) {
	if p.Cursor != "" {
		c, err := decodeCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		at := Timestamp(c.At)
		q = q.Where("("+table+"."+column+" < ?) OR ("+table+"."+column+" = ? AND "+table+".id < ?)", at, at, c.ID)
	}
	return q.Order(table + "." + column + " DESC").Order(table + ".id DESC").Limit(p.size() + 1), nil
}
