-- +goose Up
-- A plan's budget (its limits, JSON, and what it does when one runs out)
-- and what it spent against it across its runs: tokens, model and tool
-- calls, wall time, cost in nano-dollars (added to, never overwritten).
-- An API key's user limits (JSON). Kept in lockstep with
-- ../postgres/00016_budgets.sql.
ALTER TABLE agent_plans ADD COLUMN budget TEXT NOT NULL DEFAULT '{}';
ALTER TABLE agent_plans ADD COLUMN on_exhausted TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_plans ADD COLUMN spent_input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_plans ADD COLUMN spent_output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_plans ADD COLUMN spent_model_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_plans ADD COLUMN spent_tool_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_plans ADD COLUMN spent_wall_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_plans ADD COLUMN spent_cost_nano_usd INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN budget TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE api_keys DROP COLUMN budget;
ALTER TABLE agent_plans DROP COLUMN spent_cost_nano_usd;
ALTER TABLE agent_plans DROP COLUMN spent_wall_ms;
ALTER TABLE agent_plans DROP COLUMN spent_tool_calls;
ALTER TABLE agent_plans DROP COLUMN spent_model_calls;
ALTER TABLE agent_plans DROP COLUMN spent_output_tokens;
ALTER TABLE agent_plans DROP COLUMN spent_input_tokens;
ALTER TABLE agent_plans DROP COLUMN on_exhausted;
ALTER TABLE agent_plans DROP COLUMN budget;
