-- +goose Up
-- Lockstep with ../postgres/00009_log_foreign_keys.sql, which drops
-- run_events' foreign key: on PostgreSQL a check is a query per inserted
-- row, and the run log's writer checks each batch's runs itself. Here a
-- check is an index lookup, and dropping a foreign key means rebuilding the
-- table, so it stays.
SELECT 1;

-- +goose Down
SELECT 1;
