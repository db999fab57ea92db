-- +goose Up
-- Tool calls that wait on a person (holds): a call that needs approval
-- before it runs (kind approval), or a side-effect call an earlier attempt
-- of the run started and did not finish (kind in_doubt). One per run, call
-- and kind; state is pending until a person decides (approved, rejected,
-- retried, marked_done, failed) or it times out (timed_out). The arguments
-- are the model's; edited_arguments, when a person edited them, the ones
-- the call ran with; args_schema, the tool's schema an edit is checked
-- against. Kept in lockstep with ../sqlite/00015_tool_approvals.sql.
CREATE TABLE tool_approvals (
    id text NOT NULL PRIMARY KEY,
    run_id text NOT NULL,
    call_id text NOT NULL,
    kind text NOT NULL,
    user_id text NOT NULL,
    session_id text NOT NULL DEFAULT '',
    tool_name text NOT NULL,
    arguments jsonb NOT NULL,
    edited_arguments jsonb,
    effect text NOT NULL DEFAULT '',
    args_schema jsonb,
    reason text NOT NULL DEFAULT '',
    source_role text NOT NULL DEFAULT '',
    agent_id text NOT NULL DEFAULT '',
    plan_id text NOT NULL DEFAULT '',
    step_number integer NOT NULL DEFAULT 0,
    execution_id text NOT NULL DEFAULT '',
    state text NOT NULL,
    decision_reason text NOT NULL DEFAULT '',
    result text NOT NULL DEFAULT '',
    decided_by text NOT NULL DEFAULT '',
    decided_at timestamptz,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX tool_approvals_call_idx ON tool_approvals (run_id, call_id, kind);
CREATE INDEX tool_approvals_user_state_idx ON tool_approvals (user_id, state, created_at);

-- An agent definition's approval policy for its planner's tool calls
-- (never, always, side_effects; empty: the planner role's).
ALTER TABLE agent_definitions ADD COLUMN approval text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE agent_definitions DROP COLUMN approval;
DROP TABLE tool_approvals;
