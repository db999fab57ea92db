-- +goose Up
-- Runs are jobs: a run keeps what its worker needs to rebuild the work
-- (request), and is owned by one live process through a lease (owner, the
-- lease's end in Unix milliseconds, a fencing token every write of the run
-- checks, and how many times it was taken). request is text, not jsonb:
-- a message may hold \u0000, which jsonb refuses. A cancel asked on any replica
-- is recorded here for the owner to pick up. Kept in lockstep with
-- ../sqlite/00008_run_leases.sql.
ALTER TABLE runs ADD COLUMN request text NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN lease_token bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN lease_until bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN cancel_request text NOT NULL DEFAULT '';
CREATE INDEX runs_lease_idx ON runs (status, lease_until);

-- +goose Down
DROP INDEX runs_lease_idx;
ALTER TABLE runs DROP COLUMN cancel_request;
ALTER TABLE runs DROP COLUMN attempts;
ALTER TABLE runs DROP COLUMN lease_until;
ALTER TABLE runs DROP COLUMN lease_token;
ALTER TABLE runs DROP COLUMN owner;
ALTER TABLE runs DROP COLUMN request;
