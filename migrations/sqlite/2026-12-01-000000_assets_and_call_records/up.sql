-- Assets and the call catalog (docs/design.md, Tasks and Tools), SQLite twin of
-- migrations/postgres. JSON is stored as TEXT (checked with json_valid) and every
-- time as TEXT in one fixed-width form, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
-- (RFC 3339, UTC, milliseconds), so text order is time order.
-- Neither table has a foreign key to call_tasks (or to each other): an asset
-- normally outlives the task that made it, and retention deletes each table on
-- its own schedule.

CREATE TABLE assets (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    tags TEXT NOT NULL DEFAULT '[]'
        CHECK (json_valid(tags) AND json_type(tags) = 'array'),
    format TEXT NOT NULL,
    content_type TEXT NOT NULL,
    storage_key TEXT NOT NULL,
    size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
    row_count INTEGER CHECK (row_count >= 0),
    connection TEXT,
    tool TEXT NOT NULL,
    idempotency_key TEXT CHECK (idempotency_key <> ''),
    task_id TEXT,
    call_id TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

CREATE UNIQUE INDEX assets_owner_idempotency_key ON assets (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE INDEX assets_owner_created_at ON assets (owner, created_at, id);

CREATE INDEX assets_created_at ON assets (created_at, id);

CREATE TABLE call_records (
    id TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('sql', 'api', 'graphql')),
    tool TEXT NOT NULL,
    connection TEXT,
    statement TEXT NOT NULL,
    subject TEXT NOT NULL,
    persona TEXT,
    success INTEGER NOT NULL CHECK (success IN (0, 1)),
    outcome TEXT NOT NULL,
    error_message TEXT,
    duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
    rows INTEGER CHECK (rows >= 0),
    bytes INTEGER CHECK (bytes >= 0),
    asset_id TEXT,
    task_id TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

CREATE INDEX call_records_subject_created_at ON call_records (subject, created_at, id);

CREATE INDEX call_records_created_at ON call_records (created_at, id);
