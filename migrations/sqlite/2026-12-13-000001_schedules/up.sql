-- Schedules and their fires: the SQLite twin of migrations/postgres (JSON and
-- times as TEXT, as in the scripts migration).

ALTER TABLE script_runs ADD COLUMN trigger_kind TEXT NOT NULL DEFAULT 'tool'
    CHECK (trigger_kind IN ('tool', 'schedule'));
ALTER TABLE script_runs ADD COLUMN fire_time TEXT;
CREATE INDEX script_runs_open_scheduled ON script_runs (script_id)
    WHERE trigger_kind = 'schedule' AND status IN ('queued', 'running');

CREATE TABLE script_schedules (
    script_id TEXT PRIMARY KEY NOT NULL REFERENCES scripts (id) ON DELETE CASCADE,
    cron TEXT NOT NULL CHECK (cron <> ''),
    timezone TEXT NOT NULL CHECK (timezone <> ''),
    args TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(args) AND json_type(args) = 'object'),
    enabled INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    next_fire_at TEXT NOT NULL,
    last_fire_at TEXT,
    missed_fires INTEGER NOT NULL DEFAULT 0 CHECK (missed_fires >= 0),
    set_by TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) STRICT;
CREATE INDEX script_schedules_due ON script_schedules (next_fire_at) WHERE enabled = 1;

CREATE TABLE script_schedule_fires (
    script_id TEXT NOT NULL REFERENCES scripts (id) ON DELETE CASCADE,
    fire_time TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'skipped_overlap')),
    run_id TEXT,
    missed INTEGER NOT NULL DEFAULT 0 CHECK (missed >= 0),
    fired_by TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (script_id, fire_time)
) STRICT;
CREATE INDEX script_schedule_fires_created_at ON script_schedule_fires (created_at);
