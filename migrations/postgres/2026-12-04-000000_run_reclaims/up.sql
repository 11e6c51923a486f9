-- How many times a run was taken back from a worker whose lease expired (its
-- replica vanished mid-run). Counted apart from platform faults, which no
-- longer include these: a source that takes its worker down with it is
-- stopped after a few reclaims instead of taking down one replica after
-- another.
ALTER TABLE script_runs ADD COLUMN reclaims integer NOT NULL DEFAULT 0
    CHECK (reclaims >= 0);
