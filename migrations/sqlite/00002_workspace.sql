-- +goose Up
-- The workspace the built-in tools work in: a user's projects, tasks, goals,
-- milestones and documents (one table, typed), joined by typed edges.
-- Kept in lockstep with ../postgres/00002_workspace.sql.
CREATE TABLE workspace_entities (
    id text NOT NULL PRIMARY KEY,
    user_id text NOT NULL,
    entity_type text NOT NULL,
    project_id text REFERENCES workspace_entities (id) ON DELETE CASCADE,
    title text NOT NULL,
    description text NOT NULL DEFAULT '',
    status text NOT NULL DEFAULT '',
    priority text NOT NULL DEFAULT '',
    due_date text NOT NULL DEFAULT '',
    created_at datetime NOT NULL,
    updated_at datetime NOT NULL
);
CREATE INDEX workspace_entities_user_idx ON workspace_entities (user_id, entity_type, updated_at);
CREATE INDEX workspace_entities_project_idx ON workspace_entities (project_id, entity_type);

CREATE TABLE workspace_edges (
    id text NOT NULL PRIMARY KEY,
    user_id text NOT NULL,
    from_id text NOT NULL REFERENCES workspace_entities (id) ON DELETE CASCADE,
    to_id text NOT NULL REFERENCES workspace_entities (id) ON DELETE CASCADE,
    relation text NOT NULL,
    created_at datetime NOT NULL
);
CREATE UNIQUE INDEX workspace_edges_unique_idx ON workspace_edges (user_id, from_id, to_id, relation);
CREATE INDEX workspace_edges_to_idx ON workspace_edges (to_id);

-- +goose Down
DROP TABLE workspace_edges;
DROP TABLE workspace_entities;
