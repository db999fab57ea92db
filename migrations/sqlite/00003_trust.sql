-- +goose Up
-- Who let a plan run and who cancelled it, private agent definitions, and
-- client_turn_id unique per user. Kept in lockstep with ../postgres/00003_trust.sql.

-- Approval provenance: by is user, operator, auto or reviewer; empty while
-- the plan never had an approval (such a plan can never run through resume).
ALTER TABLE agent_plans ADD COLUMN approval_by text NOT NULL DEFAULT '';
ALTER TABLE agent_plans ADD COLUMN approval_user_id text NOT NULL DEFAULT '';
ALTER TABLE agent_plans ADD COLUMN approved_at datetime;
ALTER TABLE agent_plans ADD COLUMN approval_note text NOT NULL DEFAULT '';
-- Who cancelled a plan through its cancel route: user or operator.
ALTER TABLE agent_plans ADD COLUMN cancelled_by text NOT NULL DEFAULT '';
ALTER TABLE agent_plans ADD COLUMN cancelled_by_user_id text NOT NULL DEFAULT '';

-- Plans that ran before approvals were recorded: inferred from the mode (a
-- reviewed plan the reviewer approved counts as the reviewer's, any other
-- reviewed plan as its owner's).
UPDATE agent_plans SET
    approval_by = CASE
        WHEN mode = 'auto_execute' THEN 'auto'
        WHEN EXISTS (SELECT 1 FROM agent_plan_reviews r WHERE r.plan_id = agent_plans.id AND r.verdict = 'approved') THEN 'reviewer'
        ELSE 'user' END,
    approved_at = started_at,
    approval_note = 'inferred by migration 00003: the plan ran before approvals were recorded'
WHERE started_at IS NOT NULL;
UPDATE agent_plans SET approval_user_id = user_id WHERE approval_by = 'user';

-- Agent definitions are private to their creator unless shared (only
-- operators share); the default definition is shared. Names are unique per
-- creator, so a private name says nothing to other users.
ALTER TABLE agent_definitions ADD COLUMN visibility text NOT NULL DEFAULT 'private';
UPDATE agent_definitions SET visibility = 'shared' WHERE is_default;
DROP INDEX agent_definitions_name_idx;
CREATE UNIQUE INDEX agent_definitions_name_idx ON agent_definitions (created_by, name);

-- client_turn_id is unique per user (a retry without session_id finds its
-- turn). Earlier duplicates across sessions keep their first use only.
UPDATE chat_messages SET client_turn_id = NULL
WHERE client_turn_id IS NOT NULL AND EXISTS (
    SELECT 1 FROM chat_messages o
    WHERE o.user_id = chat_messages.user_id AND o.client_turn_id = chat_messages.client_turn_id
      AND o.role = chat_messages.role
      AND (o.created_at < chat_messages.created_at OR (o.created_at = chat_messages.created_at AND o.id < chat_messages.id)));
DROP INDEX chat_messages_turn_idx;
CREATE UNIQUE INDEX chat_messages_turn_idx ON chat_messages (user_id, client_turn_id, role);

-- +goose Down
DROP INDEX chat_messages_turn_idx;
CREATE UNIQUE INDEX chat_messages_turn_idx ON chat_messages (session_id, client_turn_id, role);
DROP INDEX agent_definitions_name_idx;
CREATE UNIQUE INDEX agent_definitions_name_idx ON agent_definitions (name);
ALTER TABLE agent_definitions DROP COLUMN visibility;
ALTER TABLE agent_plans DROP COLUMN cancelled_by_user_id;
ALTER TABLE agent_plans DROP COLUMN cancelled_by;
ALTER TABLE agent_plans DROP COLUMN approval_note;
ALTER TABLE agent_plans DROP COLUMN approved_at;
ALTER TABLE agent_plans DROP COLUMN approval_user_id;
ALTER TABLE agent_plans DROP COLUMN approval_by;
