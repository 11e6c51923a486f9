#![doc = include_str!("../README.md")]

mod authorize;
mod callback;
pub mod cimd;
pub mod clients;
pub mod config;
mod consent;
pub mod events;
mod flow;
mod jwks;
pub mod keys;
pub mod memory;
pub mod metadata;
pub mod params;
pub mod pkce;
pub mod rate;
pub mod redirect;
pub mod register;
mod reply;
mod revoke;
pub mod server;
mod state;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod token;
pub mod tokens;
pub mod upstream;

pub use config::{ConfigError, OAuthServerConfig, Site};
pub use events::{Event, EventKind, EventSink};
pub use memory::MemoryStore;
pub use server::{AuthorizationServer, Maintenance};
pub use store::{
    ClientRecord, Fetched, OAuthStore, OnceKind, RefreshToken, Rotation, SigningKey, StoreError,
};
pub use tokens::TokenError;
