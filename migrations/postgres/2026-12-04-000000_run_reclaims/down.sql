ALTER TABLE script_runs DROP COLUMN reclaims;
