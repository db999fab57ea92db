-- +goose Up
-- A run's trace: the W3C trace id and the id of the span its work
-- continues (the request that created it), so that every process that
-- works the run adds its spans to the same trace. Empty when the run was
-- not traced. Kept in lockstep with ../sqlite/00010_run_trace.sql.
ALTER TABLE runs ADD COLUMN trace_id text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN trace_span_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE runs DROP COLUMN trace_span_id;
ALTER TABLE runs DROP COLUMN trace_id;
