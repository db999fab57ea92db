package builtin

import "github.com/planwright/planwright/tools"

// ProjectCreated is create_project's effect: the workspace has a new
// project, and the calls after it work in that project. The agent loop
// applies ChangeScope to the run's later calls (it is an
// agents.ScopeChange); the chat moves the session into the project and
// announces the context shift.
type ProjectCreated struct {
	ID    string
	Title string
}

// ToolEffect marks ProjectCreated as a tools.Effect.
func (ProjectCreated) ToolEffect() {}

// ChangeScope moves a scope into the project: its context and focus.
func (p ProjectCreated) ChangeScope(s tools.Scope) tools.Scope {
	s.ContextType, s.EntityID, s.ProjectID = Project, p.ID, p.ID
	return s
}
