//! [`MemoryCalls`]: the call catalog in a mutex-guarded list.

use std::sync::Mutex;

use async_trait::async_trait;

use super::{lock, now, page};
use crate::{CallCatalog, CallRecord, CatalogError, NewCallRecord};

/// A [`CallCatalog`] in memory.
#[derive(Debug, Default)]
pub struct MemoryCalls {
    records: Mutex<Vec<CallRecord>>,
}

impl MemoryCalls {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl CallCatalog for MemoryCalls {
    async fn record(&self, record: NewCallRecord) -> Result<(), CatalogError> {
        record.validate()?;
        let mut records = lock(&self.records);
        if records.iter().any(|stored| stored.id == record.id) {
            return Err(CatalogError::Duplicate);
        }
        records.push(CallRecord {
            id: record.id,
            kind: record.kind,
            tool: record.tool,
            connection: record.connection,
            statement: record.statement,
            subject: record.subject,
            persona: record.persona,
            success: record.success,
            outcome: record.outcome,
            error_message: record.error_message,
            duration_ms: record.duration_ms,
            rows: record.rows,
            bytes: record.bytes,
            asset_id: record.asset_id,
            task_id: record.task_id,
            upstream_status: record.upstream_status,
            engine_user: record.engine_user,
            upstream_ids: record.upstream_ids,
            created_at: now(),
        });
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<CallRecord>, CatalogError> {
        Ok(lock(&self.records)
            .iter()
            .find(|record| record.id == id)
            .cloned())
    }

    async fn recent(
        &self,
        subject: Option<&str>,
        limit: u32,
    ) -> Result<Vec<CallRecord>, CatalogError> {
        let mut recent: Vec<CallRecord> = lock(&self.records)
            .iter()
            .filter(|record| subject.is_none_or(|subject| record.subject == subject))
            .cloned()
            .collect();
        recent.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        recent.truncate(page(limit));
        Ok(recent)
    }
}
