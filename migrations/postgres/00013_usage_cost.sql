-- +goose Up
-- What the tokens of a message, plan, review and execution cost, in US
-- dollars, by the configured prices (0: no price, or none configured).
-- Kept in lockstep with ../sqlite/00013_usage_cost.sql.
ALTER TABLE chat_messages ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;
ALTER TABLE agent_plans ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;
ALTER TABLE agent_plan_reviews ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;
ALTER TABLE agent_executions ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;
ALTER TABLE agent_chat_messages ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE agent_chat_messages DROP COLUMN cost_usd;
ALTER TABLE agent_executions DROP COLUMN cost_usd;
ALTER TABLE agent_plan_reviews DROP COLUMN cost_usd;
ALTER TABLE agent_plans DROP COLUMN cost_usd;
ALTER TABLE chat_messages DROP COLUMN cost_usd;
