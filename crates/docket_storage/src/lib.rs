#![doc = include_str!("../README.md")]

#[cfg(not(any(feature = "postgres", feature = "sqlite")))]
compile_error!(
    "docket_storage needs at least one backend: turn on its `postgres` feature, its `sqlite` \
     feature, or both (the default)"
);

mod columns;
mod database_url;
mod error;
mod links;
mod oauth;
#[cfg(feature = "postgres")]
mod pg;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
mod portal;
#[cfg(all(feature = "testing", feature = "postgres"))]
pub mod probe;
mod retention;
mod rows;
mod scripts;
mod shared;
mod spools;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(all(feature = "testing", feature = "sqlite"))]
pub mod sqlite_probe;
mod statement;
#[cfg(feature = "testing")]
pub mod test_db;
mod url;

use std::sync::Arc;

use database_url::DatabaseUrl;

/// The catalog traits, beside [`TaskStore`], so a crate that opens a store can
/// name what [`Store::asset_store`], [`Store::call_catalog`],
/// [`Store::principal_store`], [`Store::retention`] and [`Store::script_store`]
/// return.
pub use docket_catalog::{
    AssetStore, CallCatalog, CatalogError, LinkStore, PrincipalStore, Retention, ScriptStore,
    SessionStore, SpoolStore,
};
/// The authorization server's store trait, so a crate that opens a store can
/// name what [`Store::oauth_store`] returns.
pub use docket_oauth::OAuthStore;
/// The portal's store trait, so a crate that opens a store can name what
/// [`Store::portal_store`] returns.
pub use docket_portal::PortalStore;
/// The trait both stores implement, re-exported so a crate that only opens a
/// store (the binary) can name what [`Store::task_store`] returns.
pub use docket_task::TaskStore;
pub use docket_task::oversight::Oversight;
pub use error::{Cause, StorageError};
#[cfg(feature = "postgres")]
pub use pg::{PgStore, SharedStatements};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use url::Backend;

/// How [`connect`] sets up the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectOptions {
    /// The most connections the pool opens. On SQLite this is the number of
    /// reading connections; writes always go through one further connection.
    pub max_connections: usize,
    /// Whether to apply pending migrations before connecting.
    pub migrate: bool,
}

impl Default for ConnectOptions {
    /// The configuration defaults: 16 connections, migrate on start.
    fn default() -> Self {
        Self {
            max_connections: 16,
            migrate: true,
        }
    }
}

/// A connected store on one of the backends this build carries.
#[non_exhaustive]
#[derive(Clone)]
pub enum Store {
    /// PostgreSQL (feature `postgres`).
    #[cfg(feature = "postgres")]
    Postgres(Arc<PgStore>),
    /// SQLite (feature `sqlite`).
    #[cfg(feature = "sqlite")]
    Sqlite(Arc<SqliteStore>),
}

impl Store {
    /// The store as the task machinery uses it.
    pub fn task_store(&self) -> Arc<dyn TaskStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn TaskStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn TaskStore>,
        }
    }

    /// The store as the export and asset tools use it.
    pub fn asset_store(&self) -> Arc<dyn AssetStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn AssetStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn AssetStore>,
        }
    }

    /// The store as the call pipeline keeps the call catalog with it.
    pub fn call_catalog(&self) -> Arc<dyn CallCatalog> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn CallCatalog>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn CallCatalog>,
        }
    }

    /// The store as the retention pass of audit rows, call records and assets uses it.
    pub fn retention(&self) -> Arc<dyn Retention> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn Retention>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn Retention>,
        }
    }

    /// The store as the script tools and the run bridge use it.
    pub fn script_store(&self) -> Arc<dyn ScriptStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn ScriptStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn ScriptStore>,
        }
    }

    /// The store as the feed of catalog changes (NOTIFY on PostgreSQL).
    pub fn change_feed(&self) -> Arc<dyn docket_catalog::ChangeFeed> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn docket_catalog::ChangeFeed>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn docket_catalog::ChangeFeed>,
        }
    }

    /// The store as the prompt library.
    pub fn prompt_library(&self) -> Arc<dyn docket_catalog::PromptLibrary> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn docket_catalog::PromptLibrary>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn docket_catalog::PromptLibrary>,
        }
    }

    /// The store as the HTTP layer keeps the sessions of the earlier protocol era.
    pub fn session_store(&self) -> Arc<dyn SessionStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn SessionStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn SessionStore>,
        }
    }

    /// The store as the principal directory: what each signed-in person's
    /// verified claims were when last seen, for script runs acting as their owner.
    pub fn principal_store(&self) -> Arc<dyn PrincipalStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn PrincipalStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn PrincipalStore>,
        }
    }

    /// The store as the server keeps the spools of cut answers (issue 39), so a
    /// cursor made on one replica reads on from any.
    pub fn spool_store(&self) -> Arc<dyn SpoolStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn SpoolStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn SpoolStore>,
        }
    }

    /// The store as the server keeps its asset links: the keys download links
    /// are signed with and the shares owners make, so every replica signs,
    /// verifies and counts with the same rows.
    pub fn link_store(&self) -> Arc<dyn LinkStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn LinkStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn LinkStore>,
        }
    }

    /// The store as the OAuth authorization server keeps its state (clients,
    /// logins in flight, codes, refresh-token families, consents, signing
    /// keys), so that any replica serves any step of a login.
    pub fn oauth_store(&self) -> Arc<dyn OAuthStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn OAuthStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn OAuthStore>,
        }
    }

    /// The store as administrators read across everyone: the audit log and
    /// the replicas.
    pub fn oversight(&self) -> Arc<dyn Oversight> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn Oversight>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn Oversight>,
        }
    }

    /// The store as the portal keeps its state (logins in flight and
    /// sessions), so that any replica serves any request of a session.
    pub fn portal_store(&self) -> Arc<dyn PortalStore> {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(store) => Arc::clone(store) as Arc<dyn PortalStore>,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(store) => Arc::clone(store) as Arc<dyn PortalStore>,
        }
    }

    /// Which backend it runs on.
    pub fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => Backend::Postgres,
            #[cfg(feature = "sqlite")]
            Store::Sqlite(_) => Backend::Sqlite,
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL (and so any password) is deliberately not part of the output.
        f.debug_tuple("Store").field(&self.backend()).finish()
    }
}

/// Opens the store `url` names: `postgres://…` (or `postgresql://…`) or
/// `sqlite://PATH`, creating the SQLite file and its folder if they are missing.
/// With `options.migrate`, pending migrations are applied first.
///
/// # Errors
/// [`StorageError`] when the URL names no supported database or one this build
/// leaves out (features `postgres` and `sqlite`), the SQLite folder cannot be
/// created, the migrations fail, or the database cannot be reached. No error
/// carries the URL's password.
pub async fn connect(url: &str, options: ConnectOptions) -> Result<Store, StorageError> {
    match DatabaseUrl::parse(url)? {
        #[cfg(feature = "postgres")]
        DatabaseUrl::Postgres(url) => Ok(Store::Postgres(Arc::new(
            PgStore::connect(&url, &options).await?,
        ))),
        #[cfg(feature = "sqlite")]
        DatabaseUrl::Sqlite(path) => Ok(Store::Sqlite(Arc::new(
            SqliteStore::open(&path, &options).await?,
        ))),
    }
}

/// Applies the pending embedded migrations of the database `url` names. Safe to
/// run again (nothing pending is a no-op) and, on PostgreSQL, from several
/// replicas at once (they take turns on an advisory lock).
///
/// # Errors
/// [`StorageError`] when the URL names no supported database or one this build
/// leaves out, the database cannot be reached, or a migration fails.
pub async fn migrate(url: &str) -> Result<(), StorageError> {
    match DatabaseUrl::parse(url)? {
        #[cfg(feature = "postgres")]
        DatabaseUrl::Postgres(url) => pg::migrate(url).await,
        #[cfg(feature = "sqlite")]
        DatabaseUrl::Sqlite(path) => {
            database_url::create_parent_directory(&path)?;
            sqlite::migrate(path).await
        }
    }
}
