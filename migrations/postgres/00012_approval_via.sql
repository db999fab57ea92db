-- +goose Up
-- The protocol a person's approval came through when it was not the API or
-- the web app ('mcp'; empty otherwise). Kept in lockstep with
-- ../sqlite/00012_approval_via.sql.
ALTER TABLE agent_plans ADD COLUMN approval_via text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE agent_plans DROP COLUMN approval_via;
