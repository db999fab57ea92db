-- +goose Up
-- The whole schema of DESIGN.md. (The persistence work fills this file in.)
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY
);

-- +goose Down
DROP TABLE api_keys;
