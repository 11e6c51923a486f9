#![doc = include_str!("../README.md")]

pub mod authority;
mod callback;
pub mod config;
pub mod cookie;
pub mod csrf;
mod form;
mod home;
pub mod login;
mod logout;
pub mod memory;
mod portal;
mod reply;
pub mod secret;
mod session;
mod state;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use authority::{Authority, LoginError, Person};
pub use config::PortalConfig;
pub use form::MAX_FORM_BYTES;
pub use memory::MemoryStore;
pub use portal::Portal;
pub use store::{PendingLogin, PortalSession, PortalStore, StoreError, Swept};
