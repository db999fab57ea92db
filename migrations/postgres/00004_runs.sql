-- +goose Up
-- The run log: a run is a chat turn or a plan operation (approve, resume);
-- its events are appended with their seq and replayed from here. Kept in
-- lockstep with ../sqlite/00004_runs.sql.
CREATE TABLE runs (
    id text NOT NULL PRIMARY KEY,
    kind text NOT NULL,
    user_id text NOT NULL,
    session_id text NOT NULL DEFAULT '',
    plan_id text NOT NULL DEFAULT '',
    status text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    finished_at timestamptz
);
CREATE INDEX runs_user_idx ON runs (user_id, created_at);
CREATE INDEX runs_plan_idx ON runs (plan_id, created_at);

CREATE TABLE run_events (
    run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    type text NOT NULL,
    plan_id text NOT NULL DEFAULT '',
    data jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX run_events_plan_idx ON run_events (plan_id, run_id, seq);

-- +goose Down
DROP TABLE run_events;
DROP TABLE runs;
