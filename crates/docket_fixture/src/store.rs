//! Where the fixture keeps its tasks: the PostgreSQL database a URL names, or a
//! throwaway SQLite file. Either way the conformance suite runs against
//! Docket's real task stores, not a stand-in.
//!
//! The library never reads the environment: the binary decides (from
//! `DOCKET_TEST_DATABASE_URL`) and passes a [`FixtureDatabase`] in.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use docket_storage::{Backend, ConnectOptions, SessionStore, StorageError};
use docket_task::TaskStore;

/// Connections the fixture's store may open. The suite sends one request at a
/// time, so a handful is plenty.
const POOL_SIZE: usize = 4;

/// The database the fixture stores its tasks in.
pub enum FixtureDatabase {
    /// The PostgreSQL database this `postgres://` URL names, migrated on start.
    /// Tables go into the schema the URL's `search_path` selects (`public`
    /// unless the URL says otherwise, e.g. `?options=-csearch_path%3Dfixture`),
    /// and tasks stay there until their retention ends.
    Postgres(String),
    /// A new SQLite file in a fresh folder under `parent`, removed with the
    /// [`FixtureStore`].
    TemporarySqlite {
        /// Where to create the folder (the system's temporary folder, usually).
        parent: PathBuf,
    },
}

/// Why the fixture's store could not be opened.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum FixtureStoreError {
    /// The URL given for PostgreSQL names another kind of database.
    #[error("the database url must start with postgres:// or postgresql://")]
    NotPostgres,
    /// The folder for the temporary SQLite file could not be created.
    #[error("cannot create the temporary folder {}", .path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be opened or migrated.
    #[error("cannot open the task store")]
    Storage(#[source] StorageError),
}

/// The fixture's task store; keep it for as long as the app serves. Dropping it
/// removes a temporary SQLite database.
pub struct FixtureStore {
    store: Arc<dyn TaskStore>,
    sessions: Arc<dyn SessionStore>,
    backend: Backend,
    /// Declared last, so the store's handle is released before its folder goes.
    temporary_folder: Option<TemporaryFolder>,
}

impl FixtureStore {
    /// The store, for [`crate::fixture_app`].
    pub fn task_store(&self) -> Arc<dyn TaskStore> {
        Arc::clone(&self.store)
    }

    /// Where the sessions of earlier-era clients are kept, for [`crate::fixture_app`].
    pub fn session_store(&self) -> Arc<dyn SessionStore> {
        Arc::clone(&self.sessions)
    }

    /// Which database it runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The folder of a temporary SQLite database, if that is what it runs on.
    pub fn temporary_folder(&self) -> Option<&Path> {
        self.temporary_folder
            .as_ref()
            .map(|folder| folder.0.as_path())
    }
}

/// Opens (and migrates) the database the fixture keeps its tasks in.
///
/// # Errors
/// [`FixtureStoreError`] when the URL does not name PostgreSQL, the temporary
/// folder cannot be created, or the database cannot be reached or migrated.
pub async fn fixture_store(database: FixtureDatabase) -> Result<FixtureStore, FixtureStoreError> {
    let options = ConnectOptions {
        max_connections: POOL_SIZE,
        migrate: true,
    };
    match database {
        FixtureDatabase::Postgres(url) => {
            if Backend::from_url(&url) != Some(Backend::Postgres) {
                return Err(FixtureStoreError::NotPostgres);
            }
            let store = docket_storage::connect(&url, options)
                .await
                .map_err(FixtureStoreError::Storage)?;
            Ok(FixtureStore {
                store: store.task_store(),
                sessions: store.session_store(),
                backend: Backend::Postgres,
                temporary_folder: None,
            })
        }
        FixtureDatabase::TemporarySqlite { parent } => {
            let folder = TemporaryFolder::create(&parent)?;
            let url = format!("sqlite://{}", folder.0.join("tasks.db").display());
            // On failure `folder` is dropped here, which removes it again.
            let store = docket_storage::connect(&url, options)
                .await
                .map_err(FixtureStoreError::Storage)?;
            Ok(FixtureStore {
                store: store.task_store(),
                sessions: store.session_store(),
                backend: Backend::Sqlite,
                temporary_folder: Some(folder),
            })
        }
    }
}

/// A folder of the fixture's own, removed on drop.
struct TemporaryFolder(PathBuf);

impl TemporaryFolder {
    /// Creates `parent/docket-fixture-<pid>-<nanoseconds>`. `create_dir` (not
    /// `create_dir_all`) fails if the folder exists, so two fixtures never share one.
    fn create(parent: &Path) -> Result<Self, FixtureStoreError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let path = parent.join(format!("docket-fixture-{}-{nanos}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => Ok(Self(path)),
            Err(source) => Err(FixtureStoreError::Folder { path, source }),
        }
    }
}

impl Drop for TemporaryFolder {
    fn drop(&mut self) {
        // Best effort: a leftover folder in the temporary folder harms nothing,
        // and a panic in drop would hide whatever is unwinding.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
