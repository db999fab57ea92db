package llm

import "context"

type roleKey struct{}

// WithRole returns ctx carrying the agent role of a model call. The Client
// sets it on every call, so models that behave by role (the scripted and
// demo models) can read it with RoleFrom.
func WithRole(ctx context.Context, role string) context.Context {
	return context.WithValue(ctx, roleKey{}, role)
}

// RoleFrom returns the agent role of a model call, or "".
func RoleFrom(ctx context.Context) string {
	r, _ := ctx.Value(roleKey{}).(string)
	return r
}
