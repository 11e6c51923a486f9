//! Results that continue where they were cut (issue 39). When an answer stops at
//! its row limit or byte budget, the rest of the same result streams on into a
//! spool (chunks in the asset store, a row in the database) on the replica that
//! ran it, and the answer carries a [`Cursor`]: calling the tool again with it
//! returns the next page from the spool, on any replica, without running the
//! query again. A spool belongs to its caller and its tool, holds at most the
//! export limits, and is deleted when read to its end or when it expires.

mod body;
mod chunks;
mod cursor;
mod reader;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use docket_catalog::{CatalogError, NewSpool, SpoolStore};
use docket_export::sink::ObjectSink;
use serde_json::Value;
use time::OffsetDateTime;

pub(crate) use body::{BodySource, text_and_carry};
pub(crate) use cursor::{Cursor, MAX_CURSOR_BYTES};
pub(crate) use reader::{Page, PageError};
pub(crate) use writer::RowSource;

use crate::config::{ExportsConfig, ResultsConfig};

/// The bytes a row takes in a page and in a spool: its JSON and a separator.
pub(crate) fn row_bytes(row: &Value) -> u64 {
    u64::try_from(row.to_string().len()).unwrap_or(u64::MAX) + 1
}

/// The answer whose rest a spool keeps.
pub(crate) struct CutAnswer<'a> {
    /// Who may read it: the caller.
    pub(crate) owner: &'a str,
    /// The tool whose answer it continues.
    pub(crate) tool: &'static str,
    /// The connection the call used.
    pub(crate) connection: &'a str,
    /// What every page repeats: a query's columns, a response's head.
    pub(crate) columns: Value,
    /// The upstream's id of the query, when it gave one.
    pub(crate) source_id: Option<String>,
}

/// Spools and what they are kept in, with the limits that bound them.
pub(crate) struct Continuation {
    store: Arc<dyn SpoolStore>,
    sink: Arc<dyn ObjectSink>,
    results: ResultsConfig,
    exports: ExportsConfig,
    /// A filling spool not written for this long lost its replica.
    stale_after: Duration,
}

/// Why a cut answer carries no cursor.
#[derive(Debug)]
pub(crate) enum NotKept {
    /// The caller holds as many unread continuations as one caller may.
    Cap(u32),
    /// The store refused or is away.
    Store(CatalogError),
}

impl std::fmt::Display for NotKept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cap(cap) => write!(
                f,
                "you hold {cap} unread continuations, the most one caller may; read one to its end or let it expire"
            ),
            Self::Store(error) => write!(f, "the rest could not be kept: {error}"),
        }
    }
}

impl Continuation {
    /// Spools in `store` with their chunks in `sink`.
    pub(crate) fn new(
        store: Arc<dyn SpoolStore>,
        sink: Arc<dyn ObjectSink>,
        results: ResultsConfig,
        exports: ExportsConfig,
        stale_after: Duration,
    ) -> Self {
        Self {
            store,
            sink,
            results,
            exports,
            stale_after,
        }
    }

    /// Starts keeping the rest of the `cut` answer for its caller: `first`
    /// (the rows read past the cut) and then whatever `source` still yields go
    /// into a new spool, on a task of their own that outlives the request; the
    /// cursor of its start.
    ///
    /// # Errors
    /// [`NotKept`] when the spool could not be made; `source` is stopped then.
    pub(crate) async fn keep_rest(
        &self,
        cut: CutAnswer<'_>,
        first: Vec<Value>,
        source: Box<dyn RowSource>,
    ) -> Result<Cursor, NotKept> {
        let made = async {
            let id = docket_catalog::generate_id()
                .map_err(|err| NotKept::Store(CatalogError::Unavailable(err.to_string())))?;
            let created_at = OffsetDateTime::now_utc();
            let spool = NewSpool {
                id: id.clone(),
                owner: cut.owner.to_owned(),
                tool: cut.tool.to_owned(),
                connection: cut.connection.to_owned(),
                columns: cut.columns,
                source_id: cut.source_id,
                created_at,
                expires_at: created_at + self.results.continuation_ttl,
            };
            match self
                .store
                .create_spool(spool, self.results.max_spools_per_owner)
                .await
            {
                Ok(()) => Ok(id),
                Err(CatalogError::LimitReached(cap)) => Err(NotKept::Cap(cap)),
                Err(error) => Err(NotKept::Store(error)),
            }
        }
        .await;
        let id = match made {
            Ok(id) => id,
            Err(not_kept) => {
                source.stop().await;
                return Err(not_kept);
            }
        };
        let writer = writer::SpoolWriter {
            store: Arc::clone(&self.store),
            sink: Arc::clone(&self.sink),
            id: id.clone(),
            max_rows: self.exports.max_rows,
            max_bytes: self.exports.max_bytes,
            deadline: self.exports.default_timeout,
        };
        // A span of its own that follows from the request, never a child of it: a
        // child would hold the request's span open (and unexported) for as long as
        // the spool fills, which may be long after the answer left.
        let span = tracing::info_span!(
            parent: None,
            "spool_fill",
            otel.name = "result spool fill",
            otel.kind = "internal",
            "docket.spool.tool" = cut.tool,
        );
        span.follows_from(tracing::Span::current());
        tokio::spawn(tracing::Instrument::instrument(
            writer.fill(first, source),
            span,
        ));
        Ok(Cursor::start(id))
    }

    /// The page of `tool`'s result that `cursor` names, for `owner`: at most
    /// `max_rows` rows and `max_bytes` bytes. A spool read to its end is deleted.
    ///
    /// # Errors
    /// [`PageError`]: an unknown, foreign or expired cursor (one answer for all
    /// three), one past the end, or a store that is away.
    pub(crate) async fn page(
        &self,
        owner: &str,
        tool: &str,
        cursor: &str,
        max_rows: usize,
        max_bytes: u64,
    ) -> Result<Page, PageError> {
        let spools = reader::Spools {
            store: self.store.as_ref(),
            sink: self.sink.as_ref(),
            stale_after: self.stale_after,
        };
        reader::read(&spools, owner, tool, cursor, max_rows, max_bytes).await
    }

    /// Deletes up to `limit` expired spools and their chunks; how many.
    ///
    /// # Errors
    /// When the store cannot be reached.
    pub(crate) async fn delete_expired(&self, limit: u32) -> Result<u64, CatalogError> {
        let expired = self
            .store
            .take_expired_spools(OffsetDateTime::now_utc(), limit)
            .await?;
        for spool in &expired {
            chunks::delete_chunks(self.sink.as_ref(), &spool.id, spool.progress.chunks).await;
        }
        Ok(u64::try_from(expired.len()).unwrap_or(u64::MAX))
    }
}

/// The byte budget of a call: its `max_result_bytes` (at most
/// `results.max_bytes`), else `results.default_bytes`.
pub(crate) fn budget(results: &ResultsConfig, arguments: &docket_protocol::JsonObject) -> u64 {
    arguments
        .get("max_result_bytes")
        .and_then(Value::as_u64)
        .map_or(results.default_bytes, |asked| asked.min(results.max_bytes))
}
