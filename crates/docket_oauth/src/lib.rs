#![doc = include_str!("../README.md")]

pub mod memory;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use store::{
    ClientRecord, Fetched, OAuthStore, OnceKind, RefreshToken, Rotation, SigningKey, StoreError,
};
