//! [`SqliteStore`]: the [`TaskStore`], [`AssetStore`] and [`CallCatalog`] on one
//! SQLite file, the embedded single-node default.
//!
//! Choices, and what a single node gives up:
//! - SQLite is compiled in (`libsqlite3-sys/bundled`), so the store behaves the
//!   same on any machine whatever its system library.
//! - Every time is stored as text in one form, `strftime('%Y-%m-%dT%H:%M:%fZ',
//!   'now')`: RFC 3339, UTC, milliseconds, fixed width, so comparisons in SQL are
//!   text comparisons and staleness and expiry are decided on SQLite's clock.
//! - One writer: every write goes through a pool of exactly one connection, so
//!   writers queue in order instead of polling SQLite's busy lock; reads use a
//!   separate pool and, in WAL mode, never wait for the writer. `busy_timeout`
//!   still covers another process (a `docket migrate`) holding the lock.
//! - Writes are `synchronous = FULL`: a task committed before its answer went out
//!   survives a power cut, as it would on PostgreSQL with fsync on.
//! - No notifications: a cancel or answer taken by this process reaches its work
//!   directly through the runtime; there is no other replica to tell, so
//!   [`TaskStore::set_signal_listener`] keeps its no-op default.
//! - Given up: more than one replica (the file is local and SQLite has one
//!   writer), so no load balancing and no surviving the loss of the machine.

mod assets;
mod audit;
mod calls;
mod links;
mod migrations;
mod oauth;
mod portal;
mod principals;
mod prompts;
mod schedules;
mod scripts;
mod sessions;
mod spools;
mod sql;
mod tasks;

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use deadpool::managed::QueueMode;
use diesel::result::ConnectionError;
use diesel::{QueryResult, SqliteConnection};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use diesel_async::{AsyncConnection, SimpleAsyncConnection};
use docket_task::model::{Outcome, TaskError, TaskRecord};
use docket_task::oversight::{AuditQuery, AuditRecord, MAX_AUDIT_ROWS, Oversight, ReplicaBeat};
use docket_task::store::{AuditEntry, Beat};
use docket_task::{NewTask, StaleTask, StoreError, TaskId, TaskPosition, TaskStatus, TaskStore};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::ConnectOptions;
use crate::database_url::create_parent_directory;
use crate::error::{Cause, StorageError, catalog_error, pool_error, query_error};
use crate::shared::{self, Ending};
use crate::url::Backend;
use docket_catalog::{
    AnswerListener, Asset, AssetStore, CallCatalog, CallRecord, CatalogError, CreateOutcome,
    EndedSession, LibraryPrompt, NewAsset, NewCallRecord, NewPrompt, NewSession, PageCursor,
    PromptLibrary, Session, SessionStore,
};
pub(crate) use migrations::run as migrate;

/// Run on every new connection after [`sql::BUSY_TIMEOUT`], which comes first so
/// that switching the file to WAL waits for a lock rather than failing.
const CONNECTION_SETUP: &str = "PRAGMA journal_mode = WAL; \
     PRAGMA synchronous = FULL; \
     PRAGMA foreign_keys = ON;";

/// How long a caller waits for a pooled connection before the store reports
/// itself unavailable.
const POOL_WAIT: Duration = Duration::from_secs(30);

type Connection = SyncConnectionWrapper<SqliteConnection>;

/// The [`TaskStore`], [`AssetStore`] and [`CallCatalog`] on one SQLite file.
pub struct SqliteStore {
    readers: Pool<Connection>,
    writer: Pool<Connection>,
    /// Hears answers to session questions: one process writes this file, so the
    /// signal is a call in this process.
    answer_listener: std::sync::Mutex<Option<AnswerListener>>,
    /// Hears catalog changes: one process, so a call in this process.
    change_listener: std::sync::Mutex<Option<docket_catalog::ChangeListener>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("readers", &self.readers.status())
            .field("writer", &self.writer.status())
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating it and its folder if missing) the SQLite database at
    /// `path`, migrating it first with `options.migrate`.
    ///
    /// # Errors
    /// [`StorageError::CreateDirectory`] when the folder cannot be created,
    /// [`StorageError::Migrate`] when a migration fails, and
    /// [`StorageError::Connect`] when the file cannot be opened.
    pub async fn open(path: &Path, options: &ConnectOptions) -> Result<Self, StorageError> {
        create_parent_directory(path)?;
        if options.migrate {
            migrations::run(path.to_owned()).await?;
        }
        let location = path.to_string_lossy().into_owned();
        let writer = pool(&location, 1)?;
        let readers = pool(&location, options.max_connections.max(1))?;
        // Open the writer now: a path that cannot be opened fails at start-up.
        drop(writer.get().await.map_err(|error| StorageError::Connect {
            backend: Backend::Sqlite,
            source: Cause::scrubbed(&error, ""),
        })?);
        Ok(Self {
            readers,
            writer,
            answer_listener: std::sync::Mutex::default(),
            change_listener: std::sync::Mutex::default(),
        })
    }

    /// Runs `work` on a reading connection, on a blocking thread.
    pub(crate) async fn read<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        F: FnOnce(&mut SqliteConnection) -> QueryResult<R> + Send + 'static,
        R: Send + 'static,
    {
        let mut connection = self.readers.get().await.map_err(pool_error)?;
        connection.spawn_blocking(work).await.map_err(query_error)
    }

    /// Runs `work` on the one writing connection, on a blocking thread.
    pub(crate) async fn write<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        F: FnOnce(&mut SqliteConnection) -> QueryResult<R> + Send + 'static,
        R: Send + 'static,
    {
        let mut connection = self.writer.get().await.map_err(pool_error)?;
        connection.spawn_blocking(work).await.map_err(query_error)
    }
}

/// A pool of at most `size` connections to `location`, each set up on opening.
/// A checkout takes the connection returned last, whose page cache is the
/// warmest (as the PostgreSQL pool does, `pg::connection::pool`).
pub(crate) fn pool(location: &str, size: usize) -> Result<Pool<Connection>, StorageError> {
    let mut config = ManagerConfig::<Connection>::default();
    config.custom_setup = Box::new(|location| Box::pin(establish(location.to_owned())));
    // A local file does not go away under an open connection; skip the ping.
    config.recycling_method = RecyclingMethod::Fast;
    let manager = AsyncDieselConnectionManager::new_with_config(location, config);
    Pool::builder(manager)
        .max_size(size)
        .queue_mode(QueueMode::Lifo)
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(POOL_WAIT))
        .build()
        .map_err(|error| StorageError::Connect {
            backend: Backend::Sqlite,
            source: Cause::scrubbed(&error, ""),
        })
}

/// Opens one connection and sets it up.
async fn establish(location: String) -> Result<Connection, ConnectionError> {
    let mut connection = Connection::establish(&location).await?;
    for setup in [sql::BUSY_TIMEOUT, CONNECTION_SETUP] {
        connection
            .batch_execute(setup)
            .await
            .map_err(ConnectionError::CouldntSetupConfiguration)?;
    }
    Ok(connection)
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create(&self, task: NewTask) -> Result<TaskRecord, StoreError> {
        let (created, task) = self
            .write(move |conn| tasks::create(conn, &task).map(|created| (created, task)))
            .await?;
        created.record(task)
    }

    async fn get(&self, id: &TaskId) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError> {
        let id = id.as_str().to_owned();
        self.read(move |conn| tasks::get(conn, &id))
            .await?
            .map(tasks::TaskNowRow::read)
            .transpose()
    }

    async fn list_followed(
        &self,
        subject: &str,
        after: Option<&TaskPosition>,
        limit: u32,
    ) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
        let subject = subject.to_owned();
        let after = after
            .map(|position| {
                sql::stored_time(position.created_at)
                    .map(|at| (at, position.id.as_str().to_owned()))
                    .map_err(|err| {
                        StoreError::Corrupt(format!("a cursor time out of range: {err}"))
                    })
            })
            .transpose()?;
        let rows = self
            .read(move |conn| {
                let after = after.as_ref().map(|(at, id)| (at.as_str(), id.as_str()));
                tasks::list_followed(conn, &subject, after, limit)
            })
            .await?;
        crate::rows::page_with_clock(rows.into_iter().map(tasks::TaskNowRow::read))
    }

    async fn finish(
        &self,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<Option<TaskStatus>, StoreError> {
        let ending = Ending::new(outcome)?;
        let id = id.as_str().to_owned();
        self.write(move |conn| tasks::finish(conn, &id, &ending))
            .await?
            .map(|status| shared::status(&status))
            .transpose()
    }

    async fn request_cancel(&self, id: &TaskId) -> Result<(), StoreError> {
        let id = id.as_str().to_owned();
        self.write(move |conn| tasks::request_cancel(conn, &id))
            .await
    }

    async fn heartbeat(&self, replica_id: &str, beats: &[Beat]) -> Result<Vec<TaskId>, StoreError> {
        let replica_id = replica_id.to_owned();
        let beats = beats.to_vec();
        self.write(move |conn| tasks::heartbeat(conn, &replica_id, &beats))
            .await
    }

    async fn mark_draining(&self, replica_id: &str) -> Result<(), StoreError> {
        let replica_id = replica_id.to_owned();
        self.write(move |conn| tasks::mark_draining(conn, &replica_id))
            .await
    }

    async fn require_input(
        &self,
        id: &TaskId,
        requests: Map<String, Value>,
    ) -> Result<bool, StoreError> {
        let id = id.as_str().to_owned();
        self.write(move |conn| tasks::require_input(conn, &id, requests))
            .await
    }

    async fn answer_input(
        &self,
        id: &TaskId,
        responses: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        let id = id.as_str().to_owned();
        let responses = responses.clone();
        self.write(move |conn| tasks::answer_input(conn, &id, &responses))
            .await
    }

    async fn take_answers(&self, id: &TaskId) -> Result<Map<String, Value>, StoreError> {
        let id = id.as_str().to_owned();
        match self
            .write(move |conn| tasks::take_answers(conn, &id))
            .await?
        {
            Some(answers) => answers.answers(),
            None => Ok(Map::new()),
        }
    }

    async fn fail_stale(&self, stale_after: Duration) -> Result<Vec<StaleTask>, StoreError> {
        let ending = Ending::new(Outcome::Failed(TaskError::replica_gone()))?;
        let shut_down = Ending::new(Outcome::Failed(TaskError::shut_down()))?;
        self.write(move |conn| tasks::fail_stale(conn, stale_after, &ending, &shut_down))
            .await
    }

    async fn delete_expired(&self, limit: u32) -> Result<Vec<TaskId>, StoreError> {
        self.write(move |conn| tasks::delete_expired(conn, limit))
            .await
    }

    async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        self.write(move |conn| audit::insert(conn, &entry)).await
    }

    async fn audit_for_tool(&self, tool: &str, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        let tool = tool.to_owned();
        crate::rows::audit_entries(
            self.read(move |conn| audit::for_tool(conn, &tool, limit))
                .await?,
        )
    }
}

#[async_trait]
impl Oversight for SqliteStore {
    async fn search_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let text = |at: Option<time::OffsetDateTime>| {
            at.map(sql::stored_time)
                .transpose()
                .map_err(|error| StoreError::Corrupt(format!("a search time: {error}")))
        };
        let (since, until) = (text(query.since)?, text(query.until)?);
        let (subject, tool) = (query.subject.clone(), query.tool.clone());
        let limit = query.limit.min(MAX_AUDIT_ROWS);
        crate::rows::audit_records(
            self.read(move |conn| {
                audit::search(
                    conn,
                    subject.as_deref(),
                    tool.as_deref(),
                    since.as_deref(),
                    until.as_deref(),
                    limit,
                )
            })
            .await?,
        )
    }

    async fn replicas(
        &self,
        limit: u32,
    ) -> Result<(Vec<ReplicaBeat>, time::OffsetDateTime), StoreError> {
        crate::rows::replica_beats(self.read(move |conn| audit::replicas(conn, limit)).await?)
    }
}

#[async_trait]
impl AssetStore for SqliteStore {
    async fn create_or_get(&self, asset: NewAsset) -> Result<CreateOutcome, CatalogError> {
        asset.validate()?;
        self.write(move |conn| assets::create_or_get(conn, &asset))
            .await
            .map_err(catalog_error)?
            .try_into()
    }

    async fn find_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<Asset>, CatalogError> {
        let (owner, key) = (owner.to_owned(), key.to_owned());
        self.read(move |conn| assets::find_by_idempotency_key(conn, &owner, &key))
            .await
            .map_err(catalog_error)?
            .map(Asset::try_from)
            .transpose()
    }

    async fn get(&self, id: &str) -> Result<Option<Asset>, CatalogError> {
        let id = id.to_owned();
        self.read(move |conn| assets::get(conn, &id))
            .await
            .map_err(catalog_error)?
            .map(Asset::try_from)
            .transpose()
    }

    async fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        before: Option<&PageCursor>,
    ) -> Result<Vec<Asset>, CatalogError> {
        let owner = owner.map(str::to_owned);
        let before = assets::cursor(before)?;
        let rows = self
            .read(move |conn| {
                let before = before
                    .as_ref()
                    .map(|(created_at, id)| (created_at.as_str(), id.as_str()));
                assets::list(conn, owner.as_deref(), limit, before)
            })
            .await
            .map_err(catalog_error)?;
        crate::rows::assets(rows)
    }

    async fn delete(&self, id: &str) -> Result<bool, CatalogError> {
        let id = id.to_owned();
        self.write(move |conn| assets::delete(conn, &id))
            .await
            .map_err(catalog_error)
    }
}

#[async_trait]
impl CallCatalog for SqliteStore {
    async fn record(&self, record: NewCallRecord) -> Result<(), CatalogError> {
        record.validate()?;
        self.write(move |conn| calls::insert(conn, &record))
            .await
            .map_err(catalog_error)
    }

    async fn get(&self, id: &str) -> Result<Option<CallRecord>, CatalogError> {
        let id = id.to_owned();
        self.read(move |conn| calls::get(conn, &id))
            .await
            .map_err(catalog_error)?
            .map(CallRecord::try_from)
            .transpose()
    }

    async fn recent(
        &self,
        subject: Option<&str>,
        limit: u32,
    ) -> Result<Vec<CallRecord>, CatalogError> {
        let subject = subject.map(str::to_owned);
        let rows = self
            .read(move |conn| calls::recent(conn, subject.as_deref(), limit))
            .await
            .map_err(catalog_error)?;
        crate::rows::calls(rows)
    }
}

#[async_trait]
impl docket_catalog::ChangeFeed for SqliteStore {
    async fn publish(&self, change: docket_catalog::CatalogChange) -> Result<(), CatalogError> {
        let listener = self
            .change_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(listener) = listener {
            listener(change);
        }
        Ok(())
    }

    fn set_change_listener(&self, listener: docket_catalog::ChangeListener) {
        *self
            .change_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(listener);
    }
}

#[async_trait]
impl PromptLibrary for SqliteStore {
    async fn create_prompt(
        &self,
        prompt: NewPrompt,
        owner_limit: u32,
    ) -> Result<LibraryPrompt, CatalogError> {
        prompt.validate()?;
        self.write(move |conn| prompts::insert(conn, &prompt, owner_limit))
            .await
            .map_err(catalog_error)?
            .ok_or(CatalogError::LimitReached(owner_limit))?
            .into_prompt()
    }

    async fn update_prompt(
        &self,
        prompt: NewPrompt,
    ) -> Result<Option<LibraryPrompt>, CatalogError> {
        prompt.validate()?;
        self.write(move |conn| prompts::update(conn, &prompt))
            .await
            .map_err(catalog_error)?
            .map(prompts::PromptRow::into_prompt)
            .transpose()
    }

    async fn prompt(&self, name: &str) -> Result<Option<LibraryPrompt>, CatalogError> {
        let name = name.to_owned();
        self.read(move |conn| prompts::get(conn, &name))
            .await
            .map_err(catalog_error)?
            .map(prompts::PromptRow::into_prompt)
            .transpose()
    }

    async fn prompts(
        &self,
        viewer: &docket_catalog::PromptViewer<'_>,
        before: Option<&docket_catalog::PageCursor>,
        limit: u32,
    ) -> Result<Vec<LibraryPrompt>, CatalogError> {
        let before = assets::cursor(before)?;
        let (subject, persona, is_admin) = (
            viewer.subject.to_owned(),
            viewer.persona.map(str::to_owned),
            viewer.is_admin,
        );
        self.read(move |conn| {
            let viewer = docket_catalog::PromptViewer {
                subject: &subject,
                persona: persona.as_deref(),
                is_admin,
            };
            let before = before
                .as_ref()
                .map(|(created_at, name)| (created_at.as_str(), name.as_str()));
            prompts::list(conn, &viewer, before, limit)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(prompts::PromptRow::into_prompt)
        .collect()
    }

    async fn delete_prompt(&self, name: &str) -> Result<bool, CatalogError> {
        let name = name.to_owned();
        self.write(move |conn| prompts::delete(conn, &name))
            .await
            .map_err(catalog_error)
    }
}

#[async_trait]
impl docket_catalog::PrincipalStore for SqliteStore {
    async fn remember(
        &self,
        subject: &str,
        claims: &Map<String, Value>,
        now: OffsetDateTime,
    ) -> Result<(), CatalogError> {
        docket_catalog::principals::validate(subject, claims)?;
        let subject = subject.to_owned();
        let claims = crate::rows::claims_text(claims)?;
        let seen_at = assets::stored_time(now)?;
        self.write(move |conn| principals::remember(conn, &subject, &claims, &seen_at))
            .await
            .map_err(catalog_error)
    }

    async fn claims_of(&self, subject: &str) -> Result<Option<Map<String, Value>>, CatalogError> {
        let subject = subject.to_owned();
        self.read(move |conn| principals::claims_of(conn, &subject))
            .await
            .map_err(catalog_error)?
            .map(crate::rows::ClaimsRow::into_claims)
            .transpose()
    }

    async fn forget_unseen_before(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        let cutoff = assets::stored_time(cutoff)?;
        self.write(move |conn| principals::forget_unseen_before(conn, &cutoff, limit))
            .await
            .map_err(catalog_error)
            .map(|deleted| u64::try_from(deleted).unwrap_or(u64::MAX))
    }
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(
        &self,
        session: NewSession,
        per_subject: u32,
    ) -> Result<(), CatalogError> {
        session.validate()?;
        self.write(move |conn| sessions::insert(conn, &session, per_subject))
            .await
            .map_err(catalog_error)
    }

    async fn find_session(
        &self,
        id: &str,
        idle: Duration,
    ) -> Result<Option<(Session, OffsetDateTime)>, CatalogError> {
        let id = id.to_owned();
        self.read(move |conn| sessions::find(conn, &id, idle))
            .await
            .map_err(catalog_error)?
            .map(sessions::SessionRow::into_session)
            .transpose()
    }

    async fn touch_session(&self, id: &str) -> Result<(), CatalogError> {
        let id = id.to_owned();
        self.write(move |conn| sessions::touch(conn, &id))
            .await
            .map_err(catalog_error)
    }

    async fn set_session_log_level(&self, id: &str, level: &str) -> Result<(), CatalogError> {
        let (id, level) = (id.to_owned(), level.to_owned());
        self.write(move |conn| sessions::set_log_level(conn, &id, &level))
            .await
            .map_err(catalog_error)
    }

    async fn delete_session(&self, id: &str) -> Result<bool, CatalogError> {
        let id = id.to_owned();
        self.write(move |conn| sessions::delete(conn, &id))
            .await
            .map_err(catalog_error)
    }

    async fn ask(&self, session_id: &str, request_id: &str) -> Result<bool, CatalogError> {
        let (session_id, request_id) = (session_id.to_owned(), request_id.to_owned());
        self.write(move |conn| sessions::ask(conn, &session_id, &request_id))
            .await
            .map_err(catalog_error)
    }

    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Value,
    ) -> Result<bool, CatalogError> {
        let signal = docket_catalog::AnswerSignal {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
        };
        let (session, request) = (signal.session_id.clone(), signal.request_id.clone());
        let answer = answer.to_string();
        let kept = self
            .write(move |conn| sessions::put_answer(conn, &session, &request, &answer))
            .await
            .map_err(catalog_error)?;
        let listener = self
            .answer_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let (true, Some(listener)) = (kept, listener) {
            listener(signal);
        }
        Ok(kept)
    }

    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<Value>, CatalogError> {
        let (session_id, request_id) = (session_id.to_owned(), request_id.to_owned());
        self.write(move |conn| sessions::take_answer(conn, &session_id, &request_id))
            .await
            .map_err(catalog_error)?
            .map(|answer| crate::rows::json_text(&answer, "answer"))
            .transpose()
    }

    async fn forget_question(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<(), CatalogError> {
        let (session_id, request_id) = (session_id.to_owned(), request_id.to_owned());
        self.write(move |conn| sessions::forget_question(conn, &session_id, &request_id))
            .await
            .map_err(catalog_error)
    }

    async fn delete_idle_sessions(
        &self,
        idle: Duration,
        limit: usize,
    ) -> Result<Vec<EndedSession>, CatalogError> {
        self.write(move |conn| {
            sessions::delete_expired_answers(conn)?;
            sessions::delete_idle(conn, idle, limit)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(crate::rows::EndedSessionRow::into_ended)
        .collect()
    }

    async fn use_answer_once(&self, key: &str, lifetime: Duration) -> Result<bool, CatalogError> {
        let key = key.to_owned();
        self.write(move |conn| sessions::use_answer_once(conn, &key, lifetime))
            .await
            .map_err(catalog_error)
    }

    fn set_answer_listener(&self, listener: AnswerListener) {
        *self
            .answer_listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(listener);
    }
}

#[cfg(test)]
mod tests {
    use diesel::QueryableByName;
    use diesel::sql_types::BigInt;
    use diesel_async::RunQueryDsl;

    use super::*;
    use crate::statement::statement;

    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        count: i64,
    }

    /// Calls one after another all go to the connection returned last. Each
    /// connection to `:memory:` is a database of its own, so a table made on
    /// one connection tells it apart from the others.
    #[tokio::test]
    async fn a_checkout_takes_the_connection_returned_last() {
        let pool = pool(":memory:", 3).expect("open the pool");
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(pool.get().await.expect("check a connection out"));
        }
        statement("CREATE TABLE returned_last (id INTEGER)")
            .execute(&mut *held[2])
            .await
            .expect("mark the third connection");
        // Returned first to last: the marked one is returned last.
        drop(held);
        for _ in 0..4 {
            let mut conn = pool.get().await.expect("check a connection out");
            let marked = statement(
                "SELECT count(*) AS count FROM sqlite_master WHERE name = 'returned_last'",
            )
            .get_result::<Count>(&mut *conn)
            .await
            .expect("look for the mark");
            assert_eq!(
                marked.count, 1,
                "a connection other than the one returned last"
            );
        }
        assert_eq!(pool.status().size, 3, "no connection was opened or closed");
    }
}
