//! The `docket` binary for real: processes started and killed, several replicas on
//! one PostgreSQL, and the zero-configuration SQLite default surviving a restart.

mod call;
mod memory_budget;
mod replicas;
mod script_isolation;
mod script_runs;
mod support;
mod zero_config;
