package chat

import (
	"context"
	"sync"
	"time"

	"github.com/planwright/planwright/tools/builtin"
)

// ContextCacheConfig configures a ContextCache.
type ContextCacheConfig struct {
	// TTL is how long a snapshot is served (default 5 minutes).
	TTL time.Duration
	// MaxEntries bounds the cache (default 1,000); the oldest entry goes
	// first.
	MaxEntries int
	// Now is the clock (time.Now).
	Now func() time.Time
}

// ContextCache keeps workspace snapshots — a user's focused project, or
// their recent projects — between turns and ahead of them (prewarm), so a
// turn does not read the workspace again. An entry lives for TTL, and every
// workspace write made through Watch drops the entries of the projects it
// touches before anyone can read the write, so a turn never sees a snapshot
// older than the last write. A snapshot that was being read while a write
// landed is not kept. It is safe for concurrent use.
//
// Entries are per user and project rather than per session: every session
// of a user focused on one project sees the same workspace, and a chat that
// has no session yet can be prewarmed. The cache is per process; writes
// made by another process are seen when the TTL ends.
type ContextCache struct {
	cfg ContextCacheConfig

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry
	// epoch counts invalidations; a snapshot read across one is not kept.
	epoch uint64
}

type cacheKey struct{ userID, projectID string }

type cacheEntry struct {
	snap    Snapshot
	expires time.Time
	added   time.Time
}

// NewContextCache returns an empty cache.
func NewContextCache(cfg ContextCacheConfig) *ContextCache {
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Minute
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &ContextCache{cfg: cfg, entries: map[cacheKey]cacheEntry{}}
}

// get returns a live entry, or the epoch a reader must pass to put.
func (c *ContextCache) get(k cacheKey) (Snapshot, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if ok && c.cfg.Now().Before(e.expires) {
		return e.snap, c.epoch, true
	}
	if ok {
		delete(c.entries, k)
	}
	return Snapshot{}, c.epoch, false
}

// put keeps a snapshot read since epoch, unless the workspace was written
// meanwhile.
func (c *ContextCache) put(k cacheKey, epoch uint64, s Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if _, ok := c.entries[k]; !ok && len(c.entries) >= c.cfg.MaxEntries {
		var oldest cacheKey
		var at time.Time
		for key, e := range c.entries {
			if at.IsZero() || e.added.Before(at) {
				oldest, at = key, e.added
			}
		}
		delete(c.entries, oldest)
	}
	now := c.cfg.Now()
	c.entries[k] = cacheEntry{snap: s, expires: now.Add(c.cfg.TTL), added: now}
}

// Expires reports when userID's snapshot of projectID expires, if cached.
func (c *ContextCache) Expires(userID, projectID string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[cacheKey{userID, projectID}]
	if !ok || !c.cfg.Now().Before(e.expires) {
		return time.Time{}, false
	}
	return e.expires, true
}

// Invalidate drops userID's snapshots of the projects named ("" is the
// list of recent projects).
func (c *ContextCache) Invalidate(userID string, projectIDs ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	for _, p := range projectIDs {
		delete(c.entries, cacheKey{userID, p})
	}
}

// Watch returns store with every write invalidating the snapshots it
// touches: the project of each entity written (both, when one moves), the
// project itself, and the user's project list when a project changes.
func (c *ContextCache) Watch(store builtin.Store) builtin.Store {
	return &watchedStore{Store: store, cache: c}
}

type watchedStore struct {
	builtin.Store
	cache *ContextCache
}

// touched lists the snapshot keys an entity belongs to.
func touched(e builtin.Entity) []string {
	if e.Type == builtin.Project {
		return []string{e.ID, ""}
	}
	if e.ProjectID != "" {
		return []string{e.ProjectID}
	}
	return nil
}

func (w *watchedStore) CreateEntity(ctx context.Context, userID string, e *builtin.Entity) error {
	err := w.Store.CreateEntity(ctx, userID, e)
	if err == nil {
		w.cache.Invalidate(userID, touched(*e)...)
	}
	return err
}

func (w *watchedStore) UpdateEntity(ctx context.Context, userID string, e builtin.Entity) error {
	before, gerr := w.Store.GetEntity(ctx, userID, e.ID)
	err := w.Store.UpdateEntity(ctx, userID, e)
	keys := touched(e)
	if gerr == nil {
		keys = append(keys, touched(before)...)
	}
	w.cache.Invalidate(userID, keys...)
	return err
}

func (w *watchedStore) DeleteEntity(ctx context.Context, userID, id string) error {
	before, gerr := w.Store.GetEntity(ctx, userID, id)
	err := w.Store.DeleteEntity(ctx, userID, id)
	keys := []string{id}
	if gerr == nil {
		keys = append(keys, touched(before)...)
	}
	w.cache.Invalidate(userID, keys...)
	return err
}

func (w *watchedStore) CreateTree(ctx context.Context, userID string, t *builtin.Tree) error {
	err := w.Store.CreateTree(ctx, userID, t)
	if err == nil {
		w.cache.Invalidate(userID, t.Project.ID, "")
	}
	return err
}
