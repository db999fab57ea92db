-- +goose Up
-- The whole schema of DESIGN.md, kept in lockstep with ../sqlite/00001_init.sql
-- by TestMigrationsParity. IDs are UUIDv7 text; JSON columns are jsonb.

CREATE TABLE api_keys (
    id text NOT NULL PRIMARY KEY,
    user_id text NOT NULL,
    role text NOT NULL,
    name text NOT NULL DEFAULT '',
    prefix text NOT NULL,
    hash text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at timestamptz
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at);

CREATE TABLE agent_definitions (
    id text NOT NULL PRIMARY KEY,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    system_prompt text NOT NULL DEFAULT '',
    model text NOT NULL DEFAULT '',
    temperature double precision,
    tools jsonb NOT NULL DEFAULT '[]',
    max_steps integer NOT NULL DEFAULT 0,
    is_default boolean NOT NULL DEFAULT FALSE,
    created_by text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX agent_definitions_name_idx ON agent_definitions (name);

CREATE TABLE chat_sessions (
    id text NOT NULL PRIMARY KEY,
    user_id text NOT NULL,
    title text NOT NULL DEFAULT '',
    context_type text NOT NULL,
    entity_id text NOT NULL DEFAULT '',
    agent_definition_id text REFERENCES agent_definitions (id),
    metadata jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX chat_sessions_user_idx ON chat_sessions (user_id, updated_at, id);

CREATE TABLE chat_messages (
    id text NOT NULL PRIMARY KEY,
    session_id text NOT NULL REFERENCES chat_sessions (id) ON DELETE CASCADE,
    user_id text NOT NULL,
    role text NOT NULL,
    content text NOT NULL DEFAULT '',
    client_turn_id text,
    stream_run_id text NOT NULL DEFAULT '',
    tool_calls jsonb NOT NULL DEFAULT '[]',
    input_tokens integer NOT NULL DEFAULT 0,
    output_tokens integer NOT NULL DEFAULT 0,
    plan_id text NOT NULL DEFAULT '',
    finished_reason text NOT NULL DEFAULT '',
    interrupted boolean NOT NULL DEFAULT FALSE,
    interrupted_reason text NOT NULL DEFAULT '',
    partial_tokens integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL
);
CREATE INDEX chat_messages_session_idx ON chat_messages (session_id, created_at, id);
CREATE UNIQUE INDEX chat_messages_turn_idx ON chat_messages (session_id, client_turn_id, role);
CREATE INDEX chat_messages_run_idx ON chat_messages (stream_run_id);

CREATE TABLE agent_plans (
    id text NOT NULL PRIMARY KEY,
    session_id text NOT NULL DEFAULT '',
    user_id text NOT NULL,
    goal text NOT NULL,
    mode text NOT NULL,
    status text NOT NULL,
    version integer NOT NULL DEFAULT 1,
    review_round integer NOT NULL DEFAULT 0,
    reason text NOT NULL DEFAULT '',
    stream_run_id text NOT NULL DEFAULT '',
    input_tokens integer NOT NULL DEFAULT 0,
    output_tokens integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    started_at timestamptz,
    completed_at timestamptz
);
CREATE INDEX agent_plans_status_idx ON agent_plans (status, created_at);
CREATE INDEX agent_plans_session_idx ON agent_plans (session_id, created_at);
CREATE INDEX agent_plans_user_idx ON agent_plans (user_id, created_at, id);
CREATE INDEX agent_plans_created_idx ON agent_plans (created_at, id);

CREATE TABLE agent_plan_steps (
    plan_id text NOT NULL REFERENCES agent_plans (id) ON DELETE CASCADE,
    number integer NOT NULL,
    title text NOT NULL DEFAULT '',
    description text NOT NULL DEFAULT '',
    tools jsonb NOT NULL DEFAULT '[]',
    executor_required boolean NOT NULL DEFAULT FALSE,
    depends_on jsonb NOT NULL DEFAULT '[]',
    tool text NOT NULL DEFAULT '',
    args jsonb,
    status text NOT NULL,
    result text NOT NULL DEFAULT '',
    error text NOT NULL DEFAULT '',
    started_at timestamptz,
    completed_at timestamptz,
    PRIMARY KEY (plan_id, number)
);

CREATE TABLE agent_plan_revisions (
    id text NOT NULL PRIMARY KEY,
    plan_id text NOT NULL REFERENCES agent_plans (id) ON DELETE CASCADE,
    version integer NOT NULL,
    goal text NOT NULL,
    steps jsonb NOT NULL,
    author text NOT NULL,
    reason text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX agent_plan_revisions_version_idx ON agent_plan_revisions (plan_id, version);

CREATE TABLE agents (
    id text NOT NULL PRIMARY KEY,
    role text NOT NULL,
    user_id text NOT NULL,
    session_id text NOT NULL DEFAULT '',
    plan_id text NOT NULL DEFAULT '',
    step_number integer NOT NULL DEFAULT 0,
    parent_id text NOT NULL DEFAULT '',
    model text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);
CREATE INDEX agents_plan_idx ON agents (plan_id, step_number);

CREATE TABLE agent_plan_reviews (
    id text NOT NULL PRIMARY KEY,
    plan_id text NOT NULL REFERENCES agent_plans (id) ON DELETE CASCADE,
    round integer NOT NULL,
    version integer NOT NULL,
    verdict text NOT NULL,
    comments text NOT NULL DEFAULT '',
    agent_id text NOT NULL DEFAULT '',
    input_tokens integer NOT NULL DEFAULT 0,
    output_tokens integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL
);
CREATE INDEX agent_plan_reviews_plan_idx ON agent_plan_reviews (plan_id, round);

CREATE TABLE agent_chat_sessions (
    id text NOT NULL PRIMARY KEY,
    agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    plan_id text NOT NULL DEFAULT '',
    step_number integer NOT NULL DEFAULT 0,
    user_id text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX agent_chat_sessions_plan_idx ON agent_chat_sessions (plan_id, step_number);

CREATE TABLE agent_executions (
    id text NOT NULL PRIMARY KEY,
    plan_id text NOT NULL REFERENCES agent_plans (id) ON DELETE CASCADE,
    step_number integer NOT NULL,
    agent_id text NOT NULL DEFAULT '',
    agent_session_id text NOT NULL DEFAULT '',
    user_id text NOT NULL,
    status text NOT NULL,
    task text NOT NULL DEFAULT '',
    result text NOT NULL DEFAULT '',
    error text NOT NULL DEFAULT '',
    input_tokens integer NOT NULL DEFAULT 0,
    output_tokens integer NOT NULL DEFAULT 0,
    tool_calls integer NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL,
    completed_at timestamptz,
    duration_ms bigint NOT NULL DEFAULT 0
);
CREATE INDEX agent_executions_plan_idx ON agent_executions (plan_id, step_number);
CREATE INDEX agent_executions_user_idx ON agent_executions (user_id, started_at);

CREATE TABLE agent_chat_messages (
    id text NOT NULL PRIMARY KEY,
    agent_session_id text NOT NULL REFERENCES agent_chat_sessions (id) ON DELETE CASCADE,
    execution_id text NOT NULL DEFAULT '',
    seq integer NOT NULL,
    role text NOT NULL,
    content text NOT NULL DEFAULT '',
    tool_calls jsonb NOT NULL DEFAULT '[]',
    tool_call_id text NOT NULL DEFAULT '',
    name text NOT NULL DEFAULT '',
    input_tokens integer NOT NULL DEFAULT 0,
    output_tokens integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX agent_chat_messages_seq_idx ON agent_chat_messages (agent_session_id, seq);
CREATE INDEX agent_chat_messages_execution_idx ON agent_chat_messages (execution_id, seq);

CREATE TABLE chat_tool_executions (
    id text NOT NULL PRIMARY KEY,
    user_id text NOT NULL,
    session_id text NOT NULL DEFAULT '',
    tool_call_id text NOT NULL DEFAULT '',
    tool_name text NOT NULL,
    arguments jsonb,
    result text NOT NULL DEFAULT '',
    error text NOT NULL DEFAULT '',
    success boolean NOT NULL DEFAULT FALSE,
    duration_ms bigint NOT NULL DEFAULT 0,
    source_role text NOT NULL DEFAULT '',
    agent_id text NOT NULL DEFAULT '',
    plan_id text NOT NULL DEFAULT '',
    step_number integer NOT NULL DEFAULT 0,
    execution_id text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL
);
CREATE INDEX chat_tool_executions_session_idx ON chat_tool_executions (session_id, created_at);
CREATE INDEX chat_tool_executions_plan_idx ON chat_tool_executions (plan_id, step_number);
CREATE INDEX chat_tool_executions_execution_idx ON chat_tool_executions (execution_id);

-- +goose Down
DROP TABLE chat_tool_executions;
DROP TABLE agent_chat_messages;
DROP TABLE agent_executions;
DROP TABLE agent_chat_sessions;
DROP TABLE agent_plan_reviews;
DROP TABLE agents;
DROP TABLE agent_plan_revisions;
DROP TABLE agent_plan_steps;
DROP TABLE agent_plans;
DROP TABLE chat_messages;
DROP TABLE chat_sessions;
DROP TABLE agent_definitions;
DROP TABLE api_keys;
