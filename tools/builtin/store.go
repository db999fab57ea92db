// Package builtin holds the workspace tools: a user's projects, tasks,
// goals, milestones and documents, joined by typed edges — listing,
// ranked search, details, create/update/delete, relationships. Every tool
// acts for the call's user: another user's entity does not exist.
package builtin

import (
	"context"
	"time"
)

// Entity types.
const (
	Project   = "project"
	Task      = "task"
	Goal      = "goal"
	Milestone = "milestone"
	Document  = "document"
)

// Types lists the entity types.
var Types = []string{Project, Task, Goal, Milestone, Document}

// Entity is one workspace entity. Documents keep their text in
// Description.
type Entity struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	ProjectID   string    `json:"project_id,omitempty"`
	Title       string    `json:"title"`
	Description string    `json:"description,omitempty"`
	Status      string    `json:"status,omitempty"`
	Priority    string    `json:"priority,omitempty"`
	DueDate     string    `json:"due_date,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Edge is a typed link between two entities.
type Edge struct {
	ID       string `json:"id"`
	FromID   string `json:"from_id"`
	ToID     string `json:"to_id"`
	Relation string `json:"relation"`
}

// Query selects entities; empty fields match all.
type Query struct {
	Type      string
	ProjectID string
	// Text keeps entities whose title or description contains any of its
	// words; results are ranked (title matches first).
	Text  string
	Limit int
}

// Tree is a project created with its contents in one transaction.
type Tree struct {
	Project Entity
	// Children are the project's tasks, goals, milestones and documents;
	// each is linked to the project with the relation "part_of".
	Children []Entity
}

// Store keeps workspaces (persistence implements it; its contract is
// builtintest.StoreSuite). Every method is scoped to userID; another
// user's or a malformed id is apperr NotFound.
type Store interface {
	CreateEntity(ctx context.Context, userID string, e *Entity) error
	GetEntity(ctx context.Context, userID, id string) (Entity, error)
	UpdateEntity(ctx context.Context, userID string, e Entity) error
	DeleteEntity(ctx context.Context, userID, id string) error
	FindEntities(ctx context.Context, userID string, q Query) ([]Entity, error)
	CreateTree(ctx context.Context, userID string, t *Tree) error
	Link(ctx context.Context, userID string, e *Edge) error
	Unlink(ctx context.Context, userID, fromID, toID, relation string) error
	Edges(ctx context.Context, userID, entityID string) ([]Edge, error)
}
