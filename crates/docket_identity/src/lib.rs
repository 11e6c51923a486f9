#![doc = include_str!("../README.md")]

pub mod claims;
pub mod connection;
mod duration;
pub mod exchange;
pub mod headers;
pub mod secret;
pub mod user;
