-- +goose Up
-- Lockstep with ../postgres/00009_log_foreign_keys.sql, which replaces the
-- foreign keys of run_events and agent_chat_messages by checks made once a
-- batch or a statement: on PostgreSQL a key is checked by a query per
-- inserted row. Here a check is an index lookup, and dropping a foreign key
-- means rebuilding its table, so both stay.
SELECT 1;

-- +goose Down
SELECT 1;
