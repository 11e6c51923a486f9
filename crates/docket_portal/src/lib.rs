#![doc = include_str!("../README.md")]

mod admin;
pub mod authority;
mod callback;
pub mod config;
pub mod cookie;
pub mod csrf;
pub mod desk;
mod exports;
mod form;
mod home;
mod library;
pub mod login;
mod logout;
pub mod memory;
mod nav;
mod portal;
pub mod render;
mod reply;
pub mod secret;
mod session;
mod state;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod work;

pub use authority::{Authority, LoginError, Person};
pub use config::PortalConfig;
pub use desk::{AuditSearch, Desk, DeskError, RowPage, TaskLine};
pub use form::MAX_FORM_BYTES;
pub use memory::MemoryStore;
pub use portal::Portal;
pub use store::{PendingLogin, PortalSession, PortalStore, StoreError, Swept};
