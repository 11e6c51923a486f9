//! [`PgStore`]: the [`TaskStore`], [`AssetStore`] and [`CallCatalog`] on
//! PostgreSQL, for production and many replicas.
//!
//! Every operation is one statement, or one short transaction where a row must
//! be read before it is written (input requests and answers). Times that decide
//! staleness and expiry are the database's `now()`, never a replica's clock.

mod assets;
mod audit;
mod batches;
mod calls;
mod connection;
mod links;
mod listen;
mod migrations;
mod oauth;
mod portal;
mod principals;
mod prompts;
mod schedules;
mod scripts;
mod sessions;
mod spools;
mod tasks;

use std::time::Duration;

use async_trait::async_trait;
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use docket_task::model::{Outcome, TaskError, TaskRecord};
use docket_task::oversight::{AuditQuery, AuditRecord, Oversight, ReplicaBeat};
use docket_task::store::{AuditEntry, Beat, SignalListener};
use docket_task::{NewTask, StaleTask, StoreError, TaskId, TaskPosition, TaskStatus, TaskStore};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::ConnectOptions;
use crate::error::{StorageError, catalog_error, pool_error};
use crate::shared::{self, Ending};
use batches::Batches;
pub use batches::SharedStatements;
/// The test harness opens single connections the way the pool does, and the
/// benchmark's probe opens its pool as the store does.
#[cfg(feature = "testing")]
pub(crate) use connection::{establish, pool};
use docket_catalog::{
    AnswerListener, Asset, AssetStore, CallCatalog, CallRecord, CatalogError, CreateOutcome,
    EndedSession, LibraryPrompt, NewAsset, NewCallRecord, NewPrompt, NewSession, PageCursor,
    PromptLibrary, Session, SessionStore,
};
pub(crate) use migrations::run as migrate;

/// The [`TaskStore`], [`AssetStore`] and [`CallCatalog`] on PostgreSQL, over
/// one deadpool of diesel-async connections.
pub struct PgStore {
    pool: Pool<AsyncPgConnection>,
    reads: Batches<TaskId, Read>,
    creates: Batches<NewTask, Result<TaskRecord, StoreError>>,
    signals: listen::Signals<docket_task::store::TaskSignal>,
    run_signals: listen::Signals<docket_catalog::scripts::RunSignal>,
    answer_signals: listen::Signals<docket_catalog::AnswerSignal>,
    change_signals: listen::Signals<docket_catalog::CatalogChange>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may hold a password.
        f.debug_struct("PgStore")
            .field("pool", &self.pool.status())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the PostgreSQL database `url` names (a `postgres://` URL in
    /// tokio-postgres's form; `?options=-csearch_path%3D<schema>` selects a
    /// schema), migrating it first with `options.migrate`, and checks that a
    /// connection can be opened.
    ///
    /// # Errors
    /// [`StorageError::Migrate`] when a migration fails, and
    /// [`StorageError::Connect`] when the database cannot be reached.
    pub async fn connect(url: &str, options: &ConnectOptions) -> Result<Self, StorageError> {
        if options.migrate {
            migrations::run(url.to_owned()).await?;
        }
        let pool = connection::pool(url, options.max_connections).await?;
        Ok(Self {
            pool,
            reads: Batches::new(LEADERS, MOST),
            creates: Batches::new(LEADERS, MOST),
            signals: listen::Signals::tasks(url.to_owned()),
            run_signals: listen::Signals::runs(url.to_owned()),
            answer_signals: listen::Signals::answers(url.to_owned()),
            change_signals: listen::Signals::changes(url.to_owned()),
        })
    }

    /// How many task reads this store was asked for, and how many statements
    /// served them: reads that arrive together share one.
    pub fn shared_reads(&self) -> SharedStatements {
        self.reads.shared()
    }

    /// How many tasks this store was asked to create, and how many statements
    /// inserted them: creates that arrive together share one.
    pub fn shared_creates(&self) -> SharedStatements {
        self.creates.shared()
    }

    async fn conn(&self) -> Result<Object<AsyncPgConnection>, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }

    /// [`PgStore::conn`] for the catalog's operations.
    pub(crate) async fn catalog_conn(&self) -> Result<Object<AsyncPgConnection>, CatalogError> {
        self.conn().await.map_err(catalog_error)
    }
}

/// A task as read with the database clock, or `None` when there is none.
type Read = Result<Option<(TaskRecord, OffsetDateTime)>, StoreError>;

/// How many statements of one kind (reads, creates) may run for their queue at
/// once; see `batches`. Two: under load each carries more calls than with
/// four, so PostgreSQL and the driver do less a call (measured in
/// docs/benchmarks.md), and one slow statement still does not hold every call
/// up.
const LEADERS: usize = 2;

/// The most calls one statement carries; a longer queue takes several.
const MOST: usize = 256;

/// Reads the tasks `ids` name on a connection of the pool, in one statement
/// (the single-row one for one task), in their order.
async fn read_batch(pool: Pool<AsyncPgConnection>, ids: Vec<TaskId>) -> Vec<Read> {
    let mut conn = match pool.get().await {
        Ok(conn) => conn,
        Err(error) => return tasks::for_each(&ids, &pool_error(error)),
    };
    match ids.as_slice() {
        [id] => vec![tasks::get(&mut conn, id).await],
        _ => tasks::get_many(&mut conn, &ids).await,
    }
}

/// Inserts `new` on a connection of the pool, in one statement (the single-row
/// one for one task), in their order. When one statement for all fails as a
/// duplicate, each is inserted on its own, so that only the duplicate is
/// refused.
async fn create_batch(
    pool: Pool<AsyncPgConnection>,
    mut new: Vec<NewTask>,
) -> Vec<Result<TaskRecord, StoreError>> {
    let mut conn = match pool.get().await {
        Ok(conn) => conn,
        Err(error) => return tasks::for_each(&new, &pool_error(error)),
    };
    if new.len() > 1 {
        match tasks::create_many(&mut conn, new).await {
            Ok(created) => return created,
            Err((StoreError::Duplicate, given)) => new = given,
            Err((error, given)) => return tasks::for_each(&given, &error),
        }
    }
    let mut created = Vec::with_capacity(new.len());
    for task in new {
        created.push(tasks::create(&mut conn, task).await);
    }
    created
}

/// What a call reports when the statement carrying it stopped without an
/// answer (it panicked, or the runtime is shutting down).
fn stopped() -> StoreError {
    StoreError::Unavailable("the statement carrying this call stopped".into())
}

#[async_trait]
impl TaskStore for PgStore {
    /// Creates that arrive together are inserted by one statement, which
    /// commits before any of them returns.
    async fn create(&self, task: NewTask) -> Result<TaskRecord, StoreError> {
        let pool = &self.pool;
        self.creates
            .call(task, |tasks| create_batch(pool.clone(), tasks))
            .await
            .unwrap_or_else(|| Err(stopped()))
    }

    /// Reads that arrive together share one statement.
    async fn get(&self, id: &TaskId) -> Read {
        let pool = &self.pool;
        self.reads
            .call(id.clone(), |ids| read_batch(pool.clone(), ids))
            .await
            .unwrap_or_else(|| Err(stopped()))
    }

    async fn list_followed(
        &self,
        subject: &str,
        after: Option<&TaskPosition>,
        limit: u32,
    ) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
        tasks::list_followed(&mut *self.conn().await?, subject, after, limit).await
    }

    async fn finish(
        &self,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<Option<TaskStatus>, StoreError> {
        let ending = Ending::new(outcome)?;
        tasks::finish(&mut *self.conn().await?, id, ending).await
    }

    async fn request_cancel(&self, id: &TaskId) -> Result<(), StoreError> {
        tasks::request_cancel(&mut *self.conn().await?, id).await
    }

    async fn heartbeat(&self, replica_id: &str, beats: &[Beat]) -> Result<Vec<TaskId>, StoreError> {
        tasks::heartbeat(&mut *self.conn().await?, replica_id, beats).await
    }

    async fn mark_draining(&self, replica_id: &str) -> Result<(), StoreError> {
        tasks::mark_draining(&mut *self.conn().await?, replica_id).await
    }

    async fn require_input(
        &self,
        id: &TaskId,
        requests: Map<String, Value>,
    ) -> Result<bool, StoreError> {
        tasks::require_input(&mut *self.conn().await?, id, requests).await
    }

    async fn answer_input(
        &self,
        id: &TaskId,
        responses: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        tasks::answer_input(&mut *self.conn().await?, id, responses).await
    }

    async fn take_answers(&self, id: &TaskId) -> Result<Map<String, Value>, StoreError> {
        tasks::take_answers(&mut *self.conn().await?, id).await
    }

    async fn fail_stale(&self, stale_after: Duration) -> Result<Vec<StaleTask>, StoreError> {
        let ending = Ending::new(Outcome::Failed(TaskError::replica_gone()))?;
        let shut_down = Ending::new(Outcome::Failed(TaskError::shut_down()))?;
        tasks::fail_stale(
            &mut *self.conn().await?,
            shared::millis(stale_after),
            ending,
            shut_down,
        )
        .await
    }

    async fn delete_expired(&self, limit: u32) -> Result<Vec<TaskId>, StoreError> {
        tasks::delete_expired(&mut *self.conn().await?, limit).await
    }

    async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        audit::insert(&mut *self.conn().await?, &entry).await
    }

    async fn audit_for_tool(&self, tool: &str, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        audit::for_tool(&mut *self.conn().await?, tool, limit).await
    }

    fn set_signal_listener(&self, listener: SignalListener) {
        self.signals.set_listener(listener);
    }
}

#[async_trait]
impl Oversight for PgStore {
    async fn search_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError> {
        audit::search(&mut *self.conn().await?, query).await
    }

    async fn replicas(
        &self,
        limit: u32,
    ) -> Result<(Vec<ReplicaBeat>, time::OffsetDateTime), StoreError> {
        audit::replicas(&mut *self.conn().await?, limit).await
    }
}

#[async_trait]
impl AssetStore for PgStore {
    async fn create_or_get(&self, asset: NewAsset) -> Result<CreateOutcome, CatalogError> {
        asset.validate()?;
        assets::create_or_get(&mut *self.catalog_conn().await?, &asset).await
    }

    async fn find_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<Asset>, CatalogError> {
        assets::find_by_idempotency_key(&mut *self.catalog_conn().await?, owner, key).await
    }

    async fn get(&self, id: &str) -> Result<Option<Asset>, CatalogError> {
        assets::get(&mut *self.catalog_conn().await?, id).await
    }

    async fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        before: Option<&PageCursor>,
    ) -> Result<Vec<Asset>, CatalogError> {
        assets::list(&mut *self.catalog_conn().await?, owner, limit, before).await
    }

    async fn delete(&self, id: &str) -> Result<bool, CatalogError> {
        assets::delete(&mut *self.catalog_conn().await?, id).await
    }
}

#[async_trait]
impl CallCatalog for PgStore {
    async fn record(&self, record: NewCallRecord) -> Result<(), CatalogError> {
        record.validate()?;
        calls::insert(&mut *self.catalog_conn().await?, &record).await
    }

    async fn get(&self, id: &str) -> Result<Option<CallRecord>, CatalogError> {
        calls::get(&mut *self.catalog_conn().await?, id).await
    }

    async fn recent(
        &self,
        subject: Option<&str>,
        limit: u32,
    ) -> Result<Vec<CallRecord>, CatalogError> {
        calls::recent(&mut *self.catalog_conn().await?, subject, limit).await
    }
}

#[async_trait]
impl docket_catalog::ChangeFeed for PgStore {
    async fn publish(&self, change: docket_catalog::CatalogChange) -> Result<(), CatalogError> {
        prompts::notify_change(&mut *self.catalog_conn().await?, &change.payload()).await
    }

    fn set_change_listener(&self, listener: docket_catalog::ChangeListener) {
        self.change_signals.set_listener(listener);
    }
}

#[async_trait]
impl PromptLibrary for PgStore {
    async fn create_prompt(
        &self,
        prompt: NewPrompt,
        owner_limit: u32,
    ) -> Result<LibraryPrompt, CatalogError> {
        prompt.validate()?;
        prompts::insert(&mut *self.catalog_conn().await?, &prompt, owner_limit).await
    }

    async fn update_prompt(
        &self,
        prompt: NewPrompt,
    ) -> Result<Option<LibraryPrompt>, CatalogError> {
        prompt.validate()?;
        prompts::update(&mut *self.catalog_conn().await?, &prompt).await
    }

    async fn prompt(&self, name: &str) -> Result<Option<LibraryPrompt>, CatalogError> {
        prompts::get(&mut *self.catalog_conn().await?, name).await
    }

    async fn prompts(
        &self,
        viewer: &docket_catalog::PromptViewer<'_>,
        before: Option<&docket_catalog::PageCursor>,
        limit: u32,
    ) -> Result<Vec<LibraryPrompt>, CatalogError> {
        prompts::list(&mut *self.catalog_conn().await?, viewer, before, limit).await
    }

    async fn delete_prompt(&self, name: &str) -> Result<bool, CatalogError> {
        prompts::delete(&mut *self.catalog_conn().await?, name).await
    }
}

#[async_trait]
impl docket_catalog::PrincipalStore for PgStore {
    async fn remember(
        &self,
        subject: &str,
        claims: &Map<String, Value>,
        now: OffsetDateTime,
    ) -> Result<(), CatalogError> {
        docket_catalog::principals::validate(subject, claims)?;
        principals::remember(&mut *self.catalog_conn().await?, subject, claims, now).await
    }

    async fn claims_of(&self, subject: &str) -> Result<Option<Map<String, Value>>, CatalogError> {
        principals::claims_of(&mut *self.catalog_conn().await?, subject).await
    }

    async fn forget_unseen_before(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        principals::forget_unseen_before(&mut *self.catalog_conn().await?, cutoff, limit).await
    }
}

#[async_trait]
impl SessionStore for PgStore {
    async fn create_session(
        &self,
        session: NewSession,
        per_subject: u32,
    ) -> Result<(), CatalogError> {
        session.validate()?;
        sessions::insert(&mut *self.catalog_conn().await?, &session, per_subject).await
    }

    async fn find_session(
        &self,
        id: &str,
        idle: Duration,
    ) -> Result<Option<(Session, OffsetDateTime)>, CatalogError> {
        sessions::find(&mut *self.catalog_conn().await?, id, idle).await
    }

    async fn touch_session(&self, id: &str) -> Result<(), CatalogError> {
        sessions::touch(&mut *self.catalog_conn().await?, id).await
    }

    async fn set_session_log_level(&self, id: &str, level: &str) -> Result<(), CatalogError> {
        sessions::set_log_level(&mut *self.catalog_conn().await?, id, level).await
    }

    async fn delete_session(&self, id: &str) -> Result<bool, CatalogError> {
        sessions::delete(&mut *self.catalog_conn().await?, id).await
    }

    async fn ask(&self, session_id: &str, request_id: &str) -> Result<bool, CatalogError> {
        sessions::ask(&mut *self.catalog_conn().await?, session_id, request_id).await
    }

    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Value,
    ) -> Result<bool, CatalogError> {
        sessions::put_answer(
            &mut *self.catalog_conn().await?,
            session_id,
            request_id,
            &answer.to_string(),
        )
        .await
    }

    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<Value>, CatalogError> {
        sessions::take_answer(&mut *self.catalog_conn().await?, session_id, request_id)
            .await?
            .map(|answer| crate::rows::json_text(&answer, "answer"))
            .transpose()
    }

    async fn forget_question(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<(), CatalogError> {
        sessions::forget_question(&mut *self.catalog_conn().await?, session_id, request_id).await
    }

    async fn delete_idle_sessions(
        &self,
        idle: Duration,
        limit: usize,
    ) -> Result<Vec<EndedSession>, CatalogError> {
        let mut conn = self.catalog_conn().await?;
        sessions::delete_expired_answers(&mut conn).await?;
        sessions::delete_idle(&mut conn, idle, limit).await
    }

    async fn use_answer_once(&self, key: &str, lifetime: Duration) -> Result<bool, CatalogError> {
        sessions::use_answer_once(&mut *self.catalog_conn().await?, key, lifetime).await
    }

    fn set_answer_listener(&self, listener: AnswerListener) {
        self.answer_signals.set_listener(listener);
    }
}
