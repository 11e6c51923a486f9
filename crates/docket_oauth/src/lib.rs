#![doc = include_str!("../README.md")]

pub mod memory;
pub mod store;

pub use store::{
    ClientRecord, Fetched, OAuthStore, OnceKind, RefreshToken, Rotation, SigningKey, StoreError,
};
