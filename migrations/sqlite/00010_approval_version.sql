-- +goose Up
-- The plan version an approval let run (0: approved before versions were
-- recorded). Kept in lockstep with ../postgres/00010_approval_version.sql.
ALTER TABLE agent_plans ADD COLUMN approval_version integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agent_plans DROP COLUMN approval_version;
