//! The one integration test binary of `docket_server`: each module covers one area.

mod api;
mod apps;
mod auth;
mod bounds;
mod completions;
mod features;
mod http;
mod identity;
mod identity_owners;
mod legacy;
mod links;
mod listen;
mod oauth;
mod pipeline;
mod portal;
mod script_authoring;
mod script_schedules;
mod scripts;
mod service;
mod support;
mod task_metrics;
mod tasks;
mod telemetry;
mod telemetry_sdk;
mod trino;
mod upstream;
