#![doc = include_str!("../README.md")]

mod bridge;
pub mod task;

pub use bridge::{
    BridgeConfig, BridgeError, RUN_SCRIPT_TOOL, RunBridge, SandboxRunner, ScriptRunner,
};
