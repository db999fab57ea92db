-- +goose Up
-- What a run taken over by another process needs to continue from its
-- records instead of repeating them. Kept in lockstep with
-- ../sqlite/00006_resume.sql.

-- The run an agent works for: a chat turn's planner is found again by its
-- run id (one planner per run), with its transcript.
ALTER TABLE agents ADD COLUMN run_id text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX agents_run_idx ON agents (run_id, role) WHERE run_id <> '';

-- The planner's create_plan call that created a plan: a turn that runs again
-- finds the plan its call created instead of creating it twice.
ALTER TABLE agent_plans ADD COLUMN tool_call_id text NOT NULL DEFAULT '';
CREATE INDEX agent_plans_call_idx ON agent_plans (stream_run_id, tool_call_id);

-- A tool call cancelled before it finished (its record says it did nothing
-- to be answered from): a run that continues elsewhere runs it again.
ALTER TABLE chat_tool_executions ADD COLUMN cancelled boolean NOT NULL DEFAULT FALSE;
CREATE INDEX chat_tool_executions_agent_idx ON chat_tool_executions (agent_id, tool_call_id);

-- +goose Down
DROP INDEX chat_tool_executions_agent_idx;
ALTER TABLE chat_tool_executions DROP COLUMN cancelled;
DROP INDEX agent_plans_call_idx;
ALTER TABLE agent_plans DROP COLUMN tool_call_id;
DROP INDEX agents_run_idx;
ALTER TABLE agents DROP COLUMN run_id;
