DROP TABLE script_schedule_fires;
DROP TABLE script_schedules;
DROP INDEX script_runs_open_scheduled;
ALTER TABLE script_runs DROP COLUMN fire_time;
ALTER TABLE script_runs DROP COLUMN trigger_kind;
