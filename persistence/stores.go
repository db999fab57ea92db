package persistence

import (
	"github.com/planwright/planwright/pkg/auth"
	"github.com/planwright/planwright/pkg/chat"
	"github.com/planwright/planwright/planning"
	"github.com/planwright/planwright/tools"
	"github.com/planwright/planwright/tools/builtin"
)

// Stores are the stores of one database, one per aggregate, sharing one
// core (connection, clock, id generator, retry policy). It is a plain
// struct for wiring: cmd hands each field to the interfaces that consume
// it, and joins them where an interface spans two aggregates
// (PlanRecords).
type Stores struct {
	// Chats: chat sessions and their messages (chat.Store).
	Chats *Chats
	// Plans: plans, their steps and revisions.
	Plans *Plans
	// Reviews: the reviewer's rounds of a plan.
	Reviews *Reviews
	// Executions: executor agents, their transcripts and executions.
	Executions *Executions
	// ToolExecutions: every tool call (tools.Recorder).
	ToolExecutions *ToolExecutions
	// Workspace: the built-in tools' entities and edges (builtin.Store).
	Workspace *Workspace
	// Keys: API keys (auth.KeyStore).
	Keys *Keys
	// Definitions: agent definitions (chat.Definitions).
	Definitions *Definitions
	// ToolHolds: tool calls that wait on a person (approval.Store).
	ToolHolds *ToolHolds
}

// NewStores validates cfg (every bad value is reported), fills in its
// defaults and returns the stores over an open, migrated database.
func NewStores(db *DB, cfg StoreConfig) (Stores, error) {
	c, err := newCore(db, cfg)
	if err != nil {
		return Stores{}, err
	}
	return Stores{Chats: &Chats{c}, Plans: &Plans{c}, Reviews: &Reviews{c}, Executions: &Executions{c},
		ToolExecutions: &ToolExecutions{c}, Workspace: &Workspace{c}, Keys: &Keys{c}, Definitions: &Definitions{c},
		ToolHolds: &ToolHolds{c}}, nil
}

// PlanRecords joins the stores of a plan and of what its runs record — the
// plan with its steps and revisions, its reviews, its executions with their
// transcripts, and its tool calls — for the consumers whose interface spans
// them: planning.Store (plans, reviews, executions) and pkg/httpapi's
// PlanStore (all four). It adds no behaviour of its own.
type PlanRecords struct {
	*Plans
	*Reviews
	*Executions
	*ToolExecutions
}

var (
	_ planning.Store   = PlanRecords{}
	_ chat.Store       = (*Chats)(nil)
	_ chat.Definitions = (*Definitions)(nil)
	_ chat.Transcripts = (*Executions)(nil)
	_ tools.Records    = (*ToolExecutions)(nil)
	_ tools.Recorder   = (*ToolExecutions)(nil)
	_ builtin.Store    = (*Workspace)(nil)
	_ auth.KeyStore    = (*Keys)(nil)
	_ chat.Workspace   = (*Workspace)(nil)
	_ chat.Plans       = (*Plans)(nil)
)
