DROP TABLE script_runs;
DROP TABLE script_versions;
DROP TABLE scripts;
