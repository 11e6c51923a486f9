-- Managed scripts, their immutable versions, and their runs (the run queue and
-- its history). No table is qualified with a schema: per-test schemas work
-- through search_path.

-- One row per script: the live state. Names are unique per owner.
CREATE TABLE scripts (
    id text PRIMARY KEY,
    owner text NOT NULL,
    name text NOT NULL CHECK (name <> ''),
    description text NOT NULL DEFAULT '',
    -- The parameter contract: [{name, type, required, default, description}].
    params jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(params) = 'array'),
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deprecated')),
    enabled boolean NOT NULL DEFAULT true,
    -- The newest version's number.
    version integer NOT NULL CHECK (version >= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (owner, name)
);

-- One immutable row per save, with the roles its author held at that moment:
-- a run calls tools with those roles, whatever the author holds later.
CREATE TABLE script_versions (
    script_id text NOT NULL REFERENCES scripts (id) ON DELETE CASCADE,
    version integer NOT NULL CHECK (version >= 1),
    source text NOT NULL,
    description text NOT NULL,
    params jsonb NOT NULL CHECK (jsonb_typeof(params) = 'array'),
    author text NOT NULL,
    author_roles jsonb NOT NULL CHECK (jsonb_typeof(author_roles) = 'array'),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (script_id, version)
);

-- The run queue and the run history in one table. A worker claims a queued row
-- (or a running row whose lease expired) with FOR UPDATE SKIP LOCKED, and every
-- later write is fenced by (id, lease_owner, attempt).
CREATE TABLE script_runs (
    id text PRIMARY KEY,
    script_id text NOT NULL REFERENCES scripts (id) ON DELETE CASCADE,
    script_name text NOT NULL,
    -- The script's owner when the run was asked for: the owner may follow it.
    script_owner text NOT NULL,
    version integer NOT NULL,
    status text NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    params jsonb NOT NULL CHECK (jsonb_typeof(params) = 'object'),
    requested_by text NOT NULL,
    -- Raised by every claim: the fencing token.
    attempt integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    -- Platform faults so far (retried ones and leases that expired).
    platform_faults integer NOT NULL DEFAULT 0 CHECK (platform_faults >= 0),
    lease_owner text,
    lease_expires_at timestamptz,
    -- A retried run waits until then.
    not_before timestamptz NOT NULL DEFAULT now(),
    cancel_requested_at timestamptz,
    -- Tool calls so far, stamped with each lease renewal (the progress message).
    host_calls bigint NOT NULL DEFAULT 0 CHECK (host_calls >= 0),
    result jsonb,
    error text,
    -- Whose fault a failure was: the script's (never retried) or the platform's.
    error_kind text CHECK (error_kind IN ('script', 'platform')),
    log text,
    log_truncated boolean NOT NULL DEFAULT false,
    -- {steps, host_calls, duration_ms}.
    metrics jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The claim: queued rows in order, and running rows by lease expiry.
CREATE INDEX script_runs_queued ON script_runs (not_before, created_at)
    WHERE status = 'queued';
CREATE INDEX script_runs_leased ON script_runs (lease_expires_at)
    WHERE status = 'running';
-- A script's runs, newest first.
CREATE INDEX script_runs_script ON script_runs (script_id, created_at, id);
-- Everyone's runs, newest first, and the runs one caller asked for.
CREATE INDEX script_runs_created_at ON script_runs (created_at, id);
-- Retention.
CREATE INDEX script_runs_finished_at ON script_runs (finished_at)
    WHERE finished_at IS NOT NULL;
