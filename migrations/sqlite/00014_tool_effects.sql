-- +goose Up
-- What a tool call does and where it stands: the tool's effect class
-- (read_only, idempotent, side_effect; empty for calls recorded before
-- classes existed), the idempotency key the tool was given (run id ":" call
-- id), and its state — started (a side-effect call recorded before its tool
-- ran, whose outcome is unknown), finished, or in_doubt (started, never
-- finished, found by a takeover and not repeated). Kept in lockstep with
-- ../postgres/00012_tool_effects.sql.
ALTER TABLE chat_tool_executions ADD COLUMN effect text NOT NULL DEFAULT '';
ALTER TABLE chat_tool_executions ADD COLUMN idempotency_key text NOT NULL DEFAULT '';
ALTER TABLE chat_tool_executions ADD COLUMN state text NOT NULL DEFAULT 'finished';

-- +goose Down
ALTER TABLE chat_tool_executions DROP COLUMN state;
ALTER TABLE chat_tool_executions DROP COLUMN idempotency_key;
ALTER TABLE chat_tool_executions DROP COLUMN effect;
