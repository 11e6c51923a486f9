-- Schedules: at most one per script, and the fires they made. A fire happens
-- once however many replicas run the scheduler: the schedule advances with a
-- compare-and-set on next_fire_at and the fire is recorded under the unique
-- key (script_id, fire_time), in one transaction with the run it queues.

-- How a run came to be, and the fire time a scheduled run is for.
ALTER TABLE script_runs ADD COLUMN trigger_kind text NOT NULL DEFAULT 'tool'
    CHECK (trigger_kind IN ('tool', 'schedule'));
ALTER TABLE script_runs ADD COLUMN fire_time timestamptz;
-- The overlap check: a script's scheduled runs that are still open.
CREATE INDEX script_runs_open_scheduled ON script_runs (script_id)
    WHERE trigger_kind = 'schedule' AND status IN ('queued', 'running');

CREATE TABLE script_schedules (
    script_id text PRIMARY KEY REFERENCES scripts (id) ON DELETE CASCADE,
    -- Five-field cron or a descriptor (@hourly, @daily, ...), as given.
    cron text NOT NULL CHECK (cron <> ''),
    -- The IANA time zone the expression is read in.
    timezone text NOT NULL CHECK (timezone <> ''),
    -- The bound arguments of each run.
    args jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(args) = 'object'),
    enabled boolean NOT NULL DEFAULT true,
    -- The fire time the scheduler waits for.
    next_fire_at timestamptz NOT NULL,
    last_fire_at timestamptz,
    -- Fire times that passed while no scheduler ran; only the latest fired.
    missed_fires bigint NOT NULL DEFAULT 0 CHECK (missed_fires >= 0),
    set_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- The scheduler's question: which enabled schedules are due.
CREATE INDEX script_schedules_due ON script_schedules (next_fire_at) WHERE enabled;

CREATE TABLE script_schedule_fires (
    script_id text NOT NULL REFERENCES scripts (id) ON DELETE CASCADE,
    fire_time timestamptz NOT NULL,
    status text NOT NULL CHECK (status IN ('queued', 'skipped_overlap')),
    -- The run it queued (the run may be gone to retention since).
    run_id text,
    missed bigint NOT NULL DEFAULT 0 CHECK (missed >= 0),
    fired_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (script_id, fire_time)
);
-- Retention.
CREATE INDEX script_schedule_fires_created_at ON script_schedule_fires (created_at);
