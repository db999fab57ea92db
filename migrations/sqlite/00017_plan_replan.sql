-- +goose Up
-- A plan's own replan setting (off | auto), from the request that created
-- it; empty: the configured planning.replan. Kept in lockstep with
-- ../postgres/00017_plan_replan.sql.
ALTER TABLE agent_plans ADD COLUMN replan TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE agent_plans DROP COLUMN replan;
