-- +goose Up
-- A session's running turns (multitask_strategy orders them by their runs),
-- and what the retention sweep deletes by age. Kept in lockstep with
-- ../sqlite/00007_turns_retention.sql.
CREATE INDEX runs_session_idx ON runs (session_id, status, created_at);
CREATE INDEX runs_finished_idx ON runs (status, finished_at);
CREATE INDEX agent_chat_messages_created_idx ON agent_chat_messages (created_at);
CREATE INDEX agent_chat_sessions_created_idx ON agent_chat_sessions (created_at);
CREATE INDEX chat_tool_executions_created_idx ON chat_tool_executions (created_at);

-- +goose Down
DROP INDEX chat_tool_executions_created_idx;
DROP INDEX agent_chat_sessions_created_idx;
DROP INDEX agent_chat_messages_created_idx;
DROP INDEX runs_finished_idx;
DROP INDEX runs_session_idx;
