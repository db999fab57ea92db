-- +goose Up
-- The run log's events are what a turn appends most (a 12-step turn: ~110
-- events), and on PostgreSQL a foreign key is checked by a query per
-- inserted row. The run log's writer checks every run of a batch already
-- (SELECT … FOR UPDATE, its fencing check) and refuses the events of a run
-- whose row is gone, once a batch instead of once an event; the retention
-- sweep deletes a run's events with it, so no cascade is needed. SQLite
-- keeps the key (a check there is an index lookup, and dropping one means
-- rebuilding the table): ../sqlite/00009_log_foreign_keys.sql changes
-- nothing.
ALTER TABLE run_events DROP CONSTRAINT run_events_run_id_fkey;

-- +goose Down
ALTER TABLE run_events ADD CONSTRAINT run_events_run_id_fkey
    FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE;
