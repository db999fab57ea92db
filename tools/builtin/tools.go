package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/planwright/planwright/pkg/apperr"
	"github.com/planwright/planwright/pkg/event"
	"github.com/planwright/planwright/tools"
)

// ListArgs are the arguments of list_<type>s.
type ListArgs struct {
	ProjectID string `json:"project_id,omitempty" jsonschema:"only entities of this project (default: the focused project, if any)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many (default 25)"`
}

// SearchArgs are the arguments of search_<type>s and search_workspace.
type SearchArgs struct {
	Query     string `json:"query" jsonschema:"words to look for in titles and descriptions"`
	ProjectID string `json:"project_id,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// IDArgs name one entity.
type IDArgs struct {
	ID string `json:"id" jsonschema:"the entity's id"`
}

// CreateArgs are the arguments of create_<type>.
type CreateArgs struct {
	Title       string `json:"title" jsonschema:"the entity's title or name"`
	Description string `json:"description,omitempty"`
	Content     string `json:"content,omitempty" jsonschema:"a document's text"`
	ProjectID   string `json:"project_id,omitempty" jsonschema:"the project it belongs to (default: the focused project)"`
	Status      string `json:"status,omitempty"`
	Priority    string `json:"priority,omitempty"`
	DueDate     string `json:"due_date,omitempty" jsonschema:"YYYY-MM-DD"`
}

// ProjectTreeArgs create a project with its contents.
type ProjectTreeArgs struct {
	Title       string       `json:"title"`
	Description string       `json:"description,omitempty"`
	Tasks       []string     `json:"tasks,omitempty" jsonschema:"titles of tasks to create in the project"`
	Goals       []string     `json:"goals,omitempty"`
	Milestones  []string     `json:"milestones,omitempty"`
	Documents   []CreateArgs `json:"documents,omitempty"`
}

// UpdateArgs are the arguments of update_<type>.
type UpdateArgs struct {
	ID          string  `json:"id"`
	Title       *string `json:"title,omitempty"`
	Description *string `json:"description,omitempty"`
	Content     *string `json:"content,omitempty" jsonschema:"a document's text"`
	Status      *string `json:"status,omitempty"`
	Priority    *string `json:"priority,omitempty"`
	DueDate     *string `json:"due_date,omitempty"`
	// Strategy applies to the text fields: replace (default), append, or
	// merge_llm (a model merges the new text into the existing one).
	Strategy string `json:"strategy,omitempty" jsonschema:"for description and content: replace (default), append (added after the existing text), or merge_llm (the new text is merged into the existing text: duplicates dropped, contradictions resolved in favour of the new text)"`
}

// Update strategies of update_<type>.
const (
	StrategyReplace  = "replace"
	StrategyAppend   = "append"
	StrategyMergeLLM = "merge_llm"
)

// MergeRequest is one merge of the merge_llm strategy.
type MergeRequest struct {
	// EntityType and Title say what the text belongs to.
	EntityType, Title string
	// Field is description or content.
	Field string
	// Current is the stored text; Addition the text to merge into it.
	Current, Addition string
}

// MergeFunc merges an addition into an entity's text with a model call
// (agents.Merger); it returns the merged text.
type MergeFunc func(ctx context.Context, r MergeRequest) (string, error)

// Option configures the workspace tools.
type Option func(*workspace)

// WithMerger enables the merge_llm strategy of update_<type>.
func WithMerger(m MergeFunc) Option {
	return func(w *workspace) { w.merge = m }
}

// LinkArgs join two entities.
type LinkArgs struct {
	FromID   string `json:"from_id"`
	ToID     string `json:"to_id"`
	Relation string `json:"relation,omitempty" jsonschema:"how they relate, e.g. blocks, supports, part_of (default related_to)"`
}

// Tools returns every workspace tool over store.
func Tools(store Store, opts ...Option) []tools.Tool {
	w := workspace{store: store}
	for _, o := range opts {
		o(&w)
	}
	var out []tools.Tool
	for _, typ := range Types {
		out = append(out, w.list(typ), w.search(typ), w.details(typ), w.update(typ), w.remove(typ))
		if typ == Project {
			out = append(out, w.createProject())
		} else {
			out = append(out, w.create(typ))
		}
	}
	return append(out, w.searchAll(), w.relationships(), w.link(), w.unlink())
}

// Sets are the tool sets of the workspace tools, for Registry.DefineSet.
var Sets = map[string][]string{
	"workspace_read":   {"list_*", "search_*", "get_*"},
	"workspace_create": {"create_*"},
	"workspace_write":  {"update_*", "delete_*", "link_entities", "unlink_entities"},
	"workspace_links":  {"get_entity_relationships", "link_entities", "unlink_entities"},
	"workspace":        {"workspace_read", "workspace_create", "workspace_write"},
}

type workspace struct {
	store Store
	merge MergeFunc
}

func plural(typ string) string { return typ + "s" }

// projectOf is the project a call works in: the one it names, else the
// session's focused project (the scope's project, or the entity of a
// project context).
func projectOf(c tools.Call, named string) string {
	switch {
	case named != "":
		return named
	case c.Scope.ProjectID != "":
		return c.Scope.ProjectID
	case c.Scope.ContextType == "project":
		return c.Scope.EntityID
	}
	return ""
}

func operation(ctx context.Context, c tools.Call, action string, e Entity) {
	c.Events.Emit(ctx, event.Operation{Action: action, EntityType: e.Type, EntityName: e.Title, Status: "completed", EntityID: e.ID})
}

func asJSON(v any) (tools.Result, error) {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Content: string(b)}, nil
}

// summary is an entity in a list: without its long text.
type summary struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    string `json:"status,omitempty"`
	DueDate   string `json:"due_date,omitempty"`
	ProjectID string `json:"project_id,omitempty"`
}

func summaries(es []Entity) []summary {
	out := make([]summary, len(es))
	for i, e := range es {
		out[i] = summary{ID: e.ID, Type: e.Type, Title: e.Title, Status: e.Status, DueDate: e.DueDate, ProjectID: e.ProjectID}
	}
	return out
}

func (w workspace) list(typ string) tools.Tool {
	return tools.New(tools.Spec{Name: "list_" + plural(typ), Description: fmt.Sprintf("List the user's %s, most recently updated first.", plural(typ)),
		Effect: tools.ReadOnly}, func(ctx context.Context, c tools.Call, a ListArgs) (tools.Result, error) {
		es, err := w.store.FindEntities(ctx, c.Scope.UserID, Query{Type: typ, ProjectID: projectOf(c, a.ProjectID), Limit: a.Limit})
		if err != nil {
			return tools.Result{}, err
		}
		return asJSON(summaries(es))
	})
}

func (w workspace) search(typ string) tools.Tool {
	return tools.New(tools.Spec{Name: "search_" + plural(typ), Description: fmt.Sprintf("Search the user's %s by keywords, best matches first.", plural(typ)),
		Effect: tools.ReadOnly}, func(ctx context.Context, c tools.Call, a SearchArgs) (tools.Result, error) {
		if strings.TrimSpace(a.Query) == "" {
			return tools.Result{}, apperr.New(apperr.Invalid, "query is empty")
		}
		es, err := w.store.FindEntities(ctx, c.Scope.UserID, Query{Type: typ, ProjectID: projectOf(c, a.ProjectID), Text: a.Query, Limit: a.Limit})
		if err != nil {
			return tools.Result{}, err
		}
		return asJSON(summaries(es))
	})
}

func (w workspace) searchAll() tools.Tool {
	return tools.New(tools.Spec{Name: "search_workspace", Description: "Search every kind of entity in the user's workspace by keywords, best matches first.",
		Effect: tools.ReadOnly}, func(ctx context.Context, c tools.Call, a SearchArgs) (tools.Result, error) {
		if strings.TrimSpace(a.Query) == "" {
			return tools.Result{}, apperr.New(apperr.Invalid, "query is empty")
		}
		es, err := w.store.FindEntities(ctx, c.Scope.UserID, Query{ProjectID: projectOf(c, a.ProjectID), Text: a.Query, Limit: a.Limit})
		if err != nil {
			return tools.Result{}, err
		}
		return asJSON(summaries(es))
	})
}

// get finds an entity of the given type for the call's user.
func (w workspace) get(ctx context.Context, c tools.Call, typ, id string) (Entity, error) {
	e, err := w.store.GetEntity(ctx, c.Scope.UserID, id)
	if err != nil {
		return Entity{}, err
	}
	if e.Type != typ {
		return Entity{}, apperr.New(apperr.NotFound, "%s %s not found (it is a %s)", typ, id, e.Type)
	}
	return e, nil
}

func (w workspace) details(typ string) tools.Tool {
	return tools.New(tools.Spec{Name: "get_" + typ + "_details", Description: fmt.Sprintf("Everything about one %s.", typ), Effect: tools.ReadOnly},
		func(ctx context.Context, c tools.Call, a IDArgs) (tools.Result, error) {
			e, err := w.get(ctx, c, typ, a.ID)
			if err != nil {
				return tools.Result{}, err
			}
			return asJSON(e)
		})
}

func (w workspace) create(typ string) tools.Tool {
	return tools.New(tools.Spec{Name: "create_" + typ, Description: fmt.Sprintf("Create a %s.", typ), Effect: tools.SideEffect},
		func(ctx context.Context, c tools.Call, a CreateArgs) (tools.Result, error) {
			if strings.TrimSpace(a.Title) == "" {
				return tools.Result{}, apperr.New(apperr.Invalid, "title is required")
			}
			text := a.Description
			if typ == Document && a.Content != "" {
				text = a.Content
			}
			e := Entity{Type: typ, Title: strings.TrimSpace(a.Title), Description: text, ProjectID: projectOf(c, a.ProjectID),
				Status: a.Status, Priority: a.Priority, DueDate: a.DueDate}
			if err := w.store.CreateEntity(ctx, c.Scope.UserID, &e); err != nil {
				return tools.Result{}, err
			}
			operation(ctx, c, "create", e)
			return tools.Result{Content: fmt.Sprintf("Created %s %q (id %s).", typ, e.Title, e.ID)}, nil
		})
}

func (w workspace) createProject() tools.Tool {
	return tools.New(tools.Spec{Name: "create_project",
		Description: "Create a project, optionally with its tasks, goals, milestones and documents, all at once; the session moves to the new project.",
		Effect:      tools.SideEffect},
		func(ctx context.Context, c tools.Call, a ProjectTreeArgs) (tools.Result, error) {
			if strings.TrimSpace(a.Title) == "" {
				return tools.Result{}, apperr.New(apperr.Invalid, "title is required")
			}
			t := Tree{Project: Entity{Title: strings.TrimSpace(a.Title), Description: a.Description}}
			for _, group := range []struct {
				typ    string
				titles []string
			}{{Task, a.Tasks}, {Goal, a.Goals}, {Milestone, a.Milestones}} {
				for _, title := range group.titles {
					t.Children = append(t.Children, Entity{Type: group.typ, Title: title})
				}
			}
			for _, d := range a.Documents {
				text := d.Content
				if text == "" {
					text = d.Description
				}
				t.Children = append(t.Children, Entity{Type: Document, Title: d.Title, Description: text})
			}
			if err := w.store.CreateTree(ctx, c.Scope.UserID, &t); err != nil {
				return tools.Result{}, err
			}
			operation(ctx, c, "create", t.Project)
			for _, ch := range t.Children {
				operation(ctx, c, "create", ch)
			}
			msg := fmt.Sprintf("Created project %q (id %s) with %d item(s).", t.Project.Title, t.Project.ID, len(t.Children))
			return tools.Result{Content: msg, Effects: []tools.Effect{ProjectCreated{ID: t.Project.ID, Title: t.Project.Title}}}, nil
		})
}

func (w workspace) update(typ string) tools.Tool {
	return tools.New(tools.Spec{Name: "update_" + typ,
		Description: fmt.Sprintf("Change a %s. Text fields are replaced, appended to with strategy append, or merged into the existing text with strategy merge_llm.", typ),
		Effect:      tools.SideEffect},
		func(ctx context.Context, c tools.Call, a UpdateArgs) (tools.Result, error) {
			switch a.Strategy {
			case "", StrategyReplace, StrategyAppend:
			case StrategyMergeLLM:
				if w.merge == nil {
					return tools.Result{}, apperr.New(apperr.Invalid, "strategy merge_llm is not available here; use replace or append")
				}
			default:
				return tools.Result{}, apperr.New(apperr.Invalid, "strategy must be replace, append or merge_llm, not %q", a.Strategy)
			}
			e, err := w.get(ctx, c, typ, a.ID)
			if err != nil {
				return tools.Result{}, err
			}
			text := func(field, cur string, v *string) (string, error) {
				switch {
				case v == nil:
					return cur, nil
				case cur == "":
					return *v, nil
				case a.Strategy == StrategyAppend:
					return cur + "\n" + *v, nil
				case a.Strategy == StrategyMergeLLM:
					merged, err := w.merge(ctx, MergeRequest{EntityType: typ, Title: e.Title, Field: field, Current: cur, Addition: *v})
					if err != nil {
						return "", fmt.Errorf("merge the %s of %s %q: %w", field, typ, e.Title, err)
					}
					if strings.TrimSpace(merged) == "" {
						return "", apperr.New(apperr.Unavailable, "merging the %s of %s %q gave no text; nothing was changed", field, typ, e.Title)
					}
					return merged, nil
				}
				return *v, nil
			}
			set := func(dst *string, v *string) {
				if v != nil {
					*dst = *v
				}
			}
			set(&e.Title, a.Title)
			if e.Description, err = text("description", e.Description, a.Description); err != nil {
				return tools.Result{}, err
			}
			if typ == Document {
				if e.Description, err = text("content", e.Description, a.Content); err != nil {
					return tools.Result{}, err
				}
			}
			set(&e.Status, a.Status)
			set(&e.Priority, a.Priority)
			set(&e.DueDate, a.DueDate)
			if strings.TrimSpace(e.Title) == "" {
				return tools.Result{}, apperr.New(apperr.Invalid, "title cannot be empty")
			}
			if err := w.store.UpdateEntity(ctx, c.Scope.UserID, e); err != nil {
				return tools.Result{}, err
			}
			operation(ctx, c, "update", e)
			return tools.Result{Content: fmt.Sprintf("Updated %s %q.", typ, e.Title)}, nil
		})
}

func (w workspace) remove(typ string) tools.Tool {
	return tools.New(tools.Spec{Name: "delete_" + typ, Description: fmt.Sprintf("Delete a %s (a project with everything in it).", typ),
		Effect: tools.Idempotent},
		func(ctx context.Context, c tools.Call, a IDArgs) (tools.Result, error) {
			e, err := w.get(ctx, c, typ, a.ID)
			if err != nil {
				return tools.Result{}, err
			}
			if err := w.store.DeleteEntity(ctx, c.Scope.UserID, e.ID); err != nil {
				return tools.Result{}, err
			}
			operation(ctx, c, "delete", e)
			return tools.Result{Content: fmt.Sprintf("Deleted %s %q.", typ, e.Title)}, nil
		})
}

// relationship is an edge as the model sees it: with both ends named.
type relationship struct {
	Relation string `json:"relation"`
	FromID   string `json:"from_id"`
	FromName string `json:"from"`
	ToID     string `json:"to_id"`
	ToName   string `json:"to"`
}

func (w workspace) relationships() tools.Tool {
	return tools.New(tools.Spec{Name: "get_entity_relationships", Description: "The links of one entity to others, in both directions.", Effect: tools.ReadOnly},
		func(ctx context.Context, c tools.Call, a IDArgs) (tools.Result, error) {
			edges, err := w.store.Edges(ctx, c.Scope.UserID, a.ID)
			if err != nil {
				return tools.Result{}, err
			}
			out := make([]relationship, 0, len(edges))
			for _, e := range edges {
				out = append(out, relationship{Relation: e.Relation, FromID: e.FromID, FromName: w.name(ctx, c, e.FromID),
					ToID: e.ToID, ToName: w.name(ctx, c, e.ToID)})
			}
			return asJSON(out)
		})
}

// name resolves an entity's title for messages, or its id when it cannot.
func (w workspace) name(ctx context.Context, c tools.Call, id string) string {
	if e, err := w.store.GetEntity(ctx, c.Scope.UserID, id); err == nil {
		return e.Title
	}
	return id
}

func (w workspace) link() tools.Tool {
	return tools.New(tools.Spec{Name: "link_entities", Description: "Link two entities with a typed relation.",
		Effect: tools.Idempotent},
		func(ctx context.Context, c tools.Call, a LinkArgs) (tools.Result, error) {
			if a.Relation == "" {
				a.Relation = "related_to"
			}
			e := Edge{FromID: a.FromID, ToID: a.ToID, Relation: a.Relation}
			if err := w.store.Link(ctx, c.Scope.UserID, &e); err != nil {
				return tools.Result{}, err
			}
			from, to := w.name(ctx, c, a.FromID), w.name(ctx, c, a.ToID)
			c.Events.Emit(ctx, event.Operation{Action: "link", EntityType: "relationship", EntityName: from + " " + a.Relation + " " + to,
				Status: "completed", EntityID: e.ID})
			return tools.Result{Content: fmt.Sprintf("Linked %q %s %q.", from, a.Relation, to)}, nil
		})
}

func (w workspace) unlink() tools.Tool {
	return tools.New(tools.Spec{Name: "unlink_entities", Description: "Remove the link between two entities (one relation, or all of them).",
		Effect: tools.Idempotent},
		func(ctx context.Context, c tools.Call, a LinkArgs) (tools.Result, error) {
			if err := w.store.Unlink(ctx, c.Scope.UserID, a.FromID, a.ToID, a.Relation); err != nil {
				return tools.Result{}, err
			}
			from, to := w.name(ctx, c, a.FromID), w.name(ctx, c, a.ToID)
			c.Events.Emit(ctx, event.Operation{Action: "unlink", EntityType: "relationship", EntityName: from + " – " + to, Status: "completed"})
			return tools.Result{Content: fmt.Sprintf("Unlinked %q and %q.", from, to)}, nil
		})
}
