-- Managed scripts, their versions and their runs: the SQLite twin of
-- migrations/postgres. JSON as TEXT (checked with json_valid), times as TEXT in
-- the fixed-width form strftime('%Y-%m-%dT%H:%M:%fZ', 'now'). One replica, so
-- the claim needs no SKIP LOCKED: a single UPDATE on the one writer connection.

CREATE TABLE scripts (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL,
    name TEXT NOT NULL CHECK (name <> ''),
    description TEXT NOT NULL DEFAULT '',
    params TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(params) AND json_type(params) = 'array'),
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deprecated')),
    enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    version INTEGER NOT NULL CHECK (version >= 1),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (owner, name)
) STRICT;

CREATE TABLE script_versions (
    script_id TEXT NOT NULL REFERENCES scripts (id) ON DELETE CASCADE,
    version INTEGER NOT NULL CHECK (version >= 1),
    source TEXT NOT NULL,
    description TEXT NOT NULL,
    params TEXT NOT NULL CHECK (json_valid(params) AND json_type(params) = 'array'),
    author TEXT NOT NULL,
    author_roles TEXT NOT NULL CHECK (json_valid(author_roles) AND json_type(author_roles) = 'array'),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (script_id, version)
) STRICT;

CREATE TABLE script_runs (
    id TEXT PRIMARY KEY NOT NULL,
    script_id TEXT NOT NULL REFERENCES scripts (id) ON DELETE CASCADE,
    script_name TEXT NOT NULL,
    script_owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    status TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    params TEXT NOT NULL CHECK (json_valid(params) AND json_type(params) = 'object'),
    requested_by TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    platform_faults INTEGER NOT NULL DEFAULT 0 CHECK (platform_faults >= 0),
    lease_owner TEXT,
    lease_expires_at TEXT,
    not_before TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    cancel_requested_at TEXT,
    host_calls INTEGER NOT NULL DEFAULT 0 CHECK (host_calls >= 0),
    result TEXT CHECK (result IS NULL OR json_valid(result)),
    error TEXT,
    error_kind TEXT CHECK (error_kind IN ('script', 'platform')),
    log TEXT,
    log_truncated INTEGER NOT NULL DEFAULT 0 CHECK (log_truncated IN (0, 1)),
    metrics TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metrics)),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    started_at TEXT,
    finished_at TEXT,
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;

CREATE INDEX script_runs_queued ON script_runs (not_before, created_at) WHERE status = 'queued';
CREATE INDEX script_runs_leased ON script_runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX script_runs_script ON script_runs (script_id, created_at, id);
CREATE INDEX script_runs_created_at ON script_runs (created_at, id);
CREATE INDEX script_runs_finished_at ON script_runs (finished_at) WHERE finished_at IS NOT NULL;
