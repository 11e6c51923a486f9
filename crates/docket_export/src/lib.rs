#![doc = include_str!("../README.md")]

pub mod api;
pub mod cells;
pub mod export;
pub mod format;
pub mod graphql;
pub mod readonly;
pub mod sink;
pub mod trace;
pub mod trino;
pub mod view;
