-- Assets and the call catalog (docs/design.md, Tasks and Tools).
-- No table is qualified with a schema: per-test schemas work through search_path.
-- Neither table has a foreign key to call_tasks (or to each other): an asset
-- normally outlives the task that made it, and retention deletes each table on
-- its own schedule.

-- One row per exported object. The row is written only after the object is
-- complete in the object store, so a row always has its bytes.
CREATE TABLE assets (
    id text PRIMARY KEY,
    -- The subject it belongs to: only they and administrators may read it.
    owner text NOT NULL,
    name text NOT NULL,
    description text,
    tags jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(tags) = 'array'),
    -- csv, json, jsonl, parquet, … (free text: exporters may add formats).
    format text NOT NULL,
    content_type text NOT NULL,
    -- Where the object store keeps the bytes.
    storage_key text NOT NULL,
    size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
    row_count bigint CHECK (row_count >= 0),
    connection text,
    tool text NOT NULL,
    -- One asset per owner and key: a retried export returns the first asset.
    idempotency_key text CHECK (idempotency_key <> ''),
    task_id text,
    call_id text,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The idempotency rule, and the lookup an export makes before it runs.
CREATE UNIQUE INDEX assets_owner_idempotency_key ON assets (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- An owner's assets, newest first; the id orders assets of the same instant, so
-- a keyset page reads exactly the index range after its cursor.
CREATE INDEX assets_owner_created_at ON assets (owner, created_at, id);

-- Every owner's assets, newest first (administrators).
CREATE INDEX assets_created_at ON assets (created_at, id);

-- One row per data-access call (SQL, HTTP API, GraphQL), written when it ends.
CREATE TABLE call_records (
    id text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('sql', 'api', 'graphql')),
    tool text NOT NULL,
    connection text,
    -- The SQL text, the method and path, or the GraphQL operation.
    statement text NOT NULL,
    subject text NOT NULL,
    persona text,
    success boolean NOT NULL,
    -- completed, tool_error, failed or cancelled, as in audit_logs.
    outcome text NOT NULL,
    error_message text,
    duration_ms bigint NOT NULL CHECK (duration_ms >= 0),
    rows bigint CHECK (rows >= 0),
    bytes bigint CHECK (bytes >= 0),
    asset_id text,
    task_id text,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A subject's calls, newest first.
CREATE INDEX call_records_subject_created_at ON call_records (subject, created_at, id);

-- Every subject's calls, newest first (administrators), and retention by age.
CREATE INDEX call_records_created_at ON call_records (created_at, id);
