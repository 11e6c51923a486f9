#![doc = include_str!("../README.md")]

pub mod store;

pub use store::{
    ClientRecord, Fetched, OAuthStore, OnceKind, RefreshToken, Rotation, SigningKey, StoreError,
};
