package planning

import (
	"time"

	"github.com/planwright/planwright/pkg/planmode"
)

// ListQuery selects plans to list, newest first, one page at a time. Empty
// fields match all.
type ListQuery struct {
	// UserID is the caller's user, or the store's "any user" value for
	// operators; required.
	UserID    string
	Status    []Status
	Mode      planmode.Mode
	SessionID string
	// StreamRunID and ToolCallID select the plan a turn's create_plan call
	// created.
	StreamRunID, ToolCallID string
	// Since and Until bound the creation time (Until exclusive).
	Since, Until time.Time
	// Limit is the page size (0: 50; at most 200).
	Limit int
	// Cursor is the previous page's next cursor; empty for the first page.
	Cursor string
}
