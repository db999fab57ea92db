-- +goose Up
-- The run log's events and the agents' transcripts are what a turn appends
-- most (a 12-step turn: ~110 events, ~65 transcript messages), and on
-- PostgreSQL a foreign key is checked by a query per inserted row: the two
-- keys were a fifth of the database's CPU a turn. Both keep their
-- guarantee, checked once a statement or a batch instead of once a row:
--
-- run_events: the run log's writer reads every run of a batch already
-- (SELECT … FOR UPDATE, its fencing check) and refuses the events of a run
-- whose row is gone; the retention sweep deletes a run's events with it.
--
-- agent_chat_messages: a statement trigger checks the conversations of all
-- the rows one INSERT added (a missing one fails the statement with
-- foreign_key_violation, as the key did), and one on agent_chat_sessions
-- deletes the messages of the conversations a DELETE removed (the key's
-- ON DELETE CASCADE). Unlike the key they do not lock the conversation
-- while a message is added: only the retention sweep deletes
-- conversations, and only old ones with no message.
--
-- SQLite keeps both keys (a check there is an index lookup, and dropping a
-- key means rebuilding the table): ../sqlite/00009_log_foreign_keys.sql
-- changes nothing.
ALTER TABLE run_events DROP CONSTRAINT run_events_run_id_fkey;
ALTER TABLE agent_chat_messages DROP CONSTRAINT agent_chat_messages_agent_session_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION agent_chat_messages_check_sessions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM added a
               WHERE NOT EXISTS (SELECT 1 FROM agent_chat_sessions s WHERE s.id = a.agent_session_id)) THEN
        RAISE EXCEPTION 'agent_chat_messages: a message names a conversation that does not exist'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER agent_chat_messages_check_sessions AFTER INSERT ON agent_chat_messages
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION agent_chat_messages_check_sessions();

-- +goose StatementBegin
CREATE FUNCTION agent_chat_sessions_delete_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM agent_chat_messages m USING removed r WHERE m.agent_session_id = r.id;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER agent_chat_sessions_delete_messages AFTER DELETE ON agent_chat_sessions
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION agent_chat_sessions_delete_messages();

-- +goose Down
DROP TRIGGER agent_chat_sessions_delete_messages ON agent_chat_sessions;
DROP FUNCTION agent_chat_sessions_delete_messages();
DROP TRIGGER agent_chat_messages_check_sessions ON agent_chat_messages;
DROP FUNCTION agent_chat_messages_check_sessions();
ALTER TABLE agent_chat_messages ADD CONSTRAINT agent_chat_messages_agent_session_id_fkey
    FOREIGN KEY (agent_session_id) REFERENCES agent_chat_sessions (id) ON DELETE CASCADE;
ALTER TABLE run_events ADD CONSTRAINT run_events_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE;
