package persistence

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/planwright/planwright/agents"
	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/tools"
)

// Definitions stores agent definitions (agent_definitions): a definition is
// private to its creator unless shared, names are unique per creator, and
// at most one is the default. It implements chat.Definitions and pkg/httpapi's
// DefinitionStore. It is safe for concurrent use.
type Definitions struct{ *core }

type definitionRow struct {
	ID           string `gorm:"primaryKey"`
	Name         string
	Description  string
	SystemPrompt string
	Model        string
	Temperature  *float64
	Tools        jsonCol
	MaxSteps     int
	IsDefault    bool
	Visibility   string
	Approval     string
	CreatedBy    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (definitionRow) TableName() string { return "agent_definitions" }

func definitionToRow(d agents.Definition) definitionRow {
	if d.IsDefault || d.Visibility == "" {
		// The default definition is everyone's; anything else starts private.
		d.Visibility = map[bool]agents.Visibility{true: agents.VisibilityShared, false: agents.VisibilityPrivate}[d.IsDefault]
	}
	return definitionRow{Visibility: string(d.Visibility), ID: d.ID, Name: d.Name, Description: d.Description, SystemPrompt: d.SystemPrompt, Model: d.Model,
		Temperature: d.Temperature, Tools: jsonList(d.Tools), MaxSteps: d.MaxSteps, IsDefault: d.IsDefault,
		Approval: string(d.Approval), CreatedBy: d.CreatedBy, CreatedAt: Timestamp(d.CreatedAt), UpdatedAt: Timestamp(d.UpdatedAt)}
}

func (r definitionRow) definition() agents.Definition {
	return agents.Definition{ID: r.ID, Name: r.Name, Description: r.Description, SystemPrompt: r.SystemPrompt, Model: r.Model,
		Temperature: r.Temperature, Tools: fromJSON[[]string](r.Tools), MaxSteps: r.MaxSteps, IsDefault: r.IsDefault,
		Visibility: agents.Visibility(r.Visibility), Approval: tools.ApprovalPolicy(r.Approval), CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// CreateDefinition stores a new agent definition. Names are unique per
// creator (Conflict); a new default replaces the previous default. A
// definition without a visibility is private; the default is shared.
func (s *Definitions) CreateDefinition(ctx context.Context, d *agents.Definition) error {
	if d.ID == "" {
		d.ID = s.newID()
	}
	now := s.stamp()
	d.CreatedAt, d.UpdatedAt = now, now
	row := definitionToRow(*d)
	d.Visibility = agents.Visibility(row.Visibility)
	err := s.transact(ctx, func(tx *gorm.DB) error {
		if d.IsDefault {
			if err := tx.Model(&definitionRow{}).Where("is_default = ?", true).Update("is_default", false).Error; err != nil {
				return err
			}
		}
		return tx.Create(&row).Error
	})
	if isUniqueViolation(err) {
		return apperr.New(apperr.Conflict, "an agent definition named %q already exists", d.Name)
	}
	return dbErr("create agent definition", err)
}

// GetDefinition returns one agent definition, whoever may see it.
func (s *Definitions) GetDefinition(ctx context.Context, id string) (agents.Definition, error) {
	return s.DefinitionFor(ctx, AnyUser, id)
}

// visibleTo filters q to the definitions userID may see: their own and the
// shared ones (AnyUser: all).
func visibleTo(q *gorm.DB, userID string) (*gorm.DB, error) {
	switch userID {
	case AnyUser:
		return q, nil
	case "":
		return nil, apperr.New(apperr.Internal, "persistence: query without a user")
	}
	return q.Where("(created_by = ? OR visibility = ?)", userID, string(agents.VisibilityShared)), nil
}

// DefinitionFor returns definition id if userID may see it (their own or a
// shared one; AnyUser: any). Another user's private definition is NotFound.
func (s *Definitions) DefinitionFor(ctx context.Context, userID, id string) (agents.Definition, error) {
	if !validID(id) {
		return agents.Definition{}, notFound("agent definition", id)
	}
	var row definitionRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		q, err := visibleTo(g, userID)
		if err != nil {
			return err
		}
		return q.Where("id = ?", id).Take(&row).Error
	}); err != nil {
		if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
			return agents.Definition{}, notFound("agent definition", id)
		}
		return agents.Definition{}, dbErr("get agent definition", err)
	}
	return row.definition(), nil
}

// DefaultDefinition returns the definition marked default (NotFound when
// none is).
func (s *Definitions) DefaultDefinition(ctx context.Context) (agents.Definition, error) {
	var rows []definitionRow
	if err := s.do(ctx, func(g *gorm.DB) error { return g.Where("is_default = ?", true).Limit(1).Find(&rows).Error }); err != nil {
		return agents.Definition{}, dbErr("get default agent definition", err)
	}
	if len(rows) == 0 {
		return agents.Definition{}, apperr.New(apperr.NotFound, "no default agent definition")
	}
	return rows[0].definition(), nil
}

// ListDefinitions lists the agent definitions userID may see (their own
// and the shared ones; AnyUser: all) by name.
func (s *Definitions) ListDefinitions(ctx context.Context, userID string) ([]agents.Definition, error) {
	var rows []definitionRow
	if err := s.do(ctx, func(g *gorm.DB) error {
		q, err := visibleTo(g, userID)
		if err != nil {
			return err
		}
		return q.Order("name, id").Find(&rows).Error
	}); err != nil {
		return nil, dbErr("list agent definitions", err)
	}
	out := make([]agents.Definition, len(rows))
	for i, r := range rows {
		out[i] = r.definition()
	}
	return out, nil
}

// UpdateDefinition applies edit to the stored definition id and saves it in
// one transaction; the id, creator and creation time are kept.
func (s *Definitions) UpdateDefinition(ctx context.Context, id string, edit func(*agents.Definition) error) (agents.Definition, error) {
	if !validID(id) {
		return agents.Definition{}, notFound("agent definition", id)
	}
	var out agents.Definition
	err := s.transact(ctx, func(tx *gorm.DB) error {
		var row definitionRow
		if err := tx.Where("id = ?", id).Take(&row).Error; err != nil {
			if apperr.CodeOf(dbErr("", err)) == apperr.NotFound {
				return notFound("agent definition", id)
			}
			return err
		}
		d := row.definition()
		if err := edit(&d); err != nil {
			return err
		}
		d.ID, d.CreatedBy, d.CreatedAt, d.UpdatedAt = row.ID, row.CreatedBy, row.CreatedAt, s.stamp()
		if d.IsDefault && !row.IsDefault {
			if err := tx.Model(&definitionRow{}).Where("is_default = ?", true).Update("is_default", false).Error; err != nil {
				return err
			}
		}
		nr := definitionToRow(d)
		if err := tx.Select("*").Save(&nr).Error; err != nil {
			return err
		}
		d.Visibility = agents.Visibility(nr.Visibility)
		out = d
		return nil
	})
	if isUniqueViolation(err) {
		return agents.Definition{}, apperr.New(apperr.Conflict, "an agent definition with that name already exists")
	}
	if err != nil {
		return agents.Definition{}, dbErr("update agent definition", err)
	}
	return out, nil
}
