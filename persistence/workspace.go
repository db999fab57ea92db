package persistence

import (
	"context"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools/builtin"
)

// Workspace stores the workspace the built-in tools work on: users'
// entities and the edges between them (workspace_entities,
// workspace_edges). It implements builtin.Store; every method is scoped to
// one user. It is safe for concurrent use.
type Workspace struct{ *core }

type entityRow struct {
	ID          string `gorm:"primaryKey"`
	UserID      string
	EntityType  string
	ProjectID   *string
	Title       string
	Description string
	Status      string
	Priority    string
	DueDate     string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

func (entityRow) TableName() string { return "workspace_entities" }

func (r entityRow) entity() builtin.Entity {
	e := builtin.Entity{ID: r.ID, Type: r.EntityType, Title: r.Title, Description: r.Description, Status: r.Status,
		Priority: r.Priority, DueDate: r.DueDate, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if r.ProjectID != nil {
		e.ProjectID = *r.ProjectID
	}
	return e
}

type edgeRow struct {
	ID        string `gorm:"primaryKey"`
	UserID    string
	FromID    string
	ToID      string
	Relation  string
	CreatedAt time.Time
}

func (edgeRow) TableName() string { return "workspace_edges" }

func (s *Workspace) entityRow(userID string, e *builtin.Entity) entityRow {
	if e.ID == "" {
		e.ID = s.newID()
	}
	now := s.stamp()
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	e.UpdatedAt = now
	r := entityRow{ID: e.ID, UserID: userID, EntityType: e.Type, Title: e.Title, Description: e.Description, Status: e.Status,
		Priority: e.Priority, DueDate: e.DueDate, CreatedAt: Timestamp(e.CreatedAt), UpdatedAt: now}
	if e.ProjectID != "" {
		r.ProjectID = &e.ProjectID
	}
	return r
}

// checkProject makes sure a project id names userID's project.
func checkProject(ctx context.Context, tx *gorm.DB, userID, projectID string) error {
	if projectID == "" {
		return nil
	}
	var n int64
	if validID(projectID) {
		if err := tx.WithContext(ctx).Model(&entityRow{}).Where("id = ? AND user_id = ? AND entity_type = ?", projectID, userID, builtin.Project).
			Count(&n).Error; err != nil {
			return err
		}
	}
	if n == 0 {
		return notFound("project", projectID)
	}
	return nil
}

// CreateEntity stores a new workspace entity of userID.
func (s *Workspace) CreateEntity(ctx context.Context, userID string, e *builtin.Entity) error {
	if err := checkProject(ctx, s.g, userID, e.ProjectID); err != nil {
		return dbErr("create entity", err)
	}
	row := s.entityRow(userID, e)
	return dbErr("create entity", s.insert(ctx, &row))
}

// GetEntity returns userID's entity.
func (s *Workspace) GetEntity(ctx context.Context, userID, id string) (builtin.Entity, error) {
	if !validID(id) {
		return builtin.Entity{}, notFound("entity", id)
	}
	var row entityRow
	if err := s.do(ctx, func(g *gorm.DB) error { return g.Where("id = ? AND user_id = ?", id, userID).Take(&row).Error }); err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return builtin.Entity{}, notFound("entity", id)
		}
		return builtin.Entity{}, dbErr("get entity", err)
	}
	return row.entity(), nil
}

// UpdateEntity saves an entity's fields.
func (s *Workspace) UpdateEntity(ctx context.Context, userID string, e builtin.Entity) error {
	if !validID(e.ID) {
		return notFound("entity", e.ID)
	}
	if err := checkProject(ctx, s.g, userID, e.ProjectID); err != nil {
		return dbErr("update entity", err)
	}
	var project *string
	if e.ProjectID != "" {
		project = &e.ProjectID
	}
	now := s.stamp()
	n, err := s.update(ctx, func(g *gorm.DB) *gorm.DB {
		return g.Model(&entityRow{}).Where("id = ? AND user_id = ?", e.ID, userID).Updates(map[string]any{
			"title": e.Title, "description": e.Description, "status": e.Status, "priority": e.Priority, "due_date": e.DueDate,
			"project_id": project, "updated_at": now})
	})
	if err != nil {
		return dbErr("update entity", err)
	}
	if n == 0 {
		return notFound("entity", e.ID)
	}
	return nil
}

// DeleteEntity removes an entity (a project with everything in it) and its
// edges.
func (s *Workspace) DeleteEntity(ctx context.Context, userID, id string) error {
	if !validID(id) {
		return notFound("entity", id)
	}
	res := s.g.WithContext(ctx).Where("id = ? AND user_id = ?", id, userID).Delete(&entityRow{})
	if res.Error != nil {
		return dbErr("delete entity", res.Error)
	}
	if res.RowsAffected == 0 {
		return notFound("entity", id)
	}
	return nil
}

// FindEntities lists userID's entities matching q; with Text, ranked by
// matches (in the title counting double), else most recently updated first.
func (s *Workspace) FindEntities(ctx context.Context, userID string, q builtin.Query) ([]builtin.Entity, error) {
	db := s.g.WithContext(ctx).Where("user_id = ?", userID)
	if q.Type != "" {
		db = db.Where("entity_type = ?", q.Type)
	}
	if q.ProjectID != "" {
		db = db.Where("(project_id = ? OR id = ?)", q.ProjectID, q.ProjectID)
	}
	terms := strings.Fields(strings.ToLower(q.Text))
	if len(terms) > 0 {
		var conds []string
		var args []any
		for _, t := range terms {
			like := "%" + strings.NewReplacer("%", "", "_", "").Replace(t) + "%"
			conds = append(conds, "LOWER(title) LIKE ? OR LOWER(description) LIKE ?")
			args = append(args, like, like)
		}
		db = db.Where(strings.Join(conds, " OR "), args...)
	}
	limit := q.Limit
	if limit <= 0 || limit > 100 {
		limit = 25
	}
	var rows []entityRow
	if err := db.Order("updated_at DESC, id DESC").Limit(500).Find(&rows).Error; err != nil {
		return nil, dbErr("find entities", err)
	}
	out := make([]builtin.Entity, len(rows))
	for i, r := range rows {
		out[i] = r.entity()
	}
	if len(terms) > 0 {
		score := func(e builtin.Entity) int {
			title, desc, n := strings.ToLower(e.Title), strings.ToLower(e.Description), 0
			for _, t := range terms {
				n += 2*strings.Count(title, t) + strings.Count(desc, t)
			}
			return n
		}
		sort.SliceStable(out, func(i, j int) bool { return score(out[i]) > score(out[j]) })
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// CreateTree creates a project with its contents and their "part_of"
// edges in one transaction: all of it, or none.
func (s *Workspace) CreateTree(ctx context.Context, userID string, t *builtin.Tree) error {
	err := s.transact(ctx, func(tx *gorm.DB) error {
		t.Project.Type, t.Project.ProjectID = builtin.Project, ""
		row := s.entityRow(userID, &t.Project)
		if err := tx.Create(&row).Error; err != nil {
			return err
		}
		for i := range t.Children {
			c := &t.Children[i]
			c.ProjectID = t.Project.ID
			cr := s.entityRow(userID, c)
			if err := tx.Create(&cr).Error; err != nil {
				return err
			}
			edge := edgeRow{ID: s.newID(), UserID: userID, FromID: c.ID, ToID: t.Project.ID, Relation: "part_of", CreatedAt: s.stamp()}
			if err := tx.Create(&edge).Error; err != nil {
				return err
			}
		}
		return nil
	})
	return dbErr("create project", err)
}

// Link joins two of userID's entities.
func (s *Workspace) Link(ctx context.Context, userID string, e *builtin.Edge) error {
	for _, id := range []string{e.FromID, e.ToID} {
		if _, err := s.GetEntity(ctx, userID, id); err != nil {
			return err
		}
	}
	if e.ID == "" {
		e.ID = s.newID()
	}
	row := edgeRow{ID: e.ID, UserID: userID, FromID: e.FromID, ToID: e.ToID, Relation: e.Relation, CreatedAt: s.stamp()}
	err := s.insert(ctx, &row)
	if isUniqueViolation(err) {
		return apperr.New(apperr.Conflict, "%s is already linked to %s as %s", e.FromID, e.ToID, e.Relation)
	}
	return dbErr("link entities", err)
}

// Unlink removes a link (any relation when relation is empty).
func (s *Workspace) Unlink(ctx context.Context, userID, fromID, toID, relation string) error {
	db := s.g.WithContext(ctx).Where("user_id = ? AND from_id = ? AND to_id = ?", userID, fromID, toID)
	if relation != "" {
		db = db.Where("relation = ?", relation)
	}
	res := db.Delete(&edgeRow{})
	if res.Error != nil {
		return dbErr("unlink entities", res.Error)
	}
	if res.RowsAffected == 0 {
		return apperr.New(apperr.NotFound, "no link from %s to %s", fromID, toID)
	}
	return nil
}

// Edges lists an entity's links in both directions.
func (s *Workspace) Edges(ctx context.Context, userID, entityID string) ([]builtin.Edge, error) {
	if _, err := s.GetEntity(ctx, userID, entityID); err != nil {
		return nil, err
	}
	var rows []edgeRow
	if err := s.g.WithContext(ctx).Where("user_id = ? AND (from_id = ? OR to_id = ?)", userID, entityID, entityID).
		Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, dbErr("list edges", err)
	}
	out := make([]builtin.Edge, len(rows))
	for i, r := range rows {
		out[i] = builtin.Edge{ID: r.ID, FromID: r.FromID, ToID: r.ToID, Relation: r.Relation}
	}
	return out, nil
}
