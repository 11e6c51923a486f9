//! What the database holds once the soak is over, read directly (not through any of
//! Docket's stores, whose behaviour is what is being checked): the task table, the
//! runs, the audit log and the asset rows. Timestamps come as Unix seconds, JSON as
//! text, so no column needs a client feature.

use anyhow::Context as _;
use serde_json::{Value, json};

/// A row of `call_tasks`.
#[derive(Clone, Debug)]
pub(crate) struct TaskRow {
    pub(crate) id: String,
    pub(crate) tool: String,
    pub(crate) status: String,
    pub(crate) replica_id: String,
    pub(crate) arguments: Value,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<Value>,
    pub(crate) created_at: f64,
    pub(crate) last_updated_at: f64,
    pub(crate) cancel_requested_at: Option<f64>,
}

/// A row of `script_runs`.
#[derive(Clone, Debug)]
pub(crate) struct RunRow {
    pub(crate) id: String,
    pub(crate) status: String,
    pub(crate) attempt: i32,
    pub(crate) reclaims: i32,
    pub(crate) error: Option<String>,
    pub(crate) error_kind: Option<String>,
    pub(crate) host_calls: i64,
    pub(crate) finished_at: Option<f64>,
    pub(crate) cancel_requested_at: Option<f64>,
}

/// A row of `audit_logs`.
#[derive(Clone, Debug)]
pub(crate) struct AuditRow {
    pub(crate) id: i64,
    pub(crate) tool: String,
    pub(crate) subject: String,
    pub(crate) arguments: Value,
    pub(crate) outcome: String,
    pub(crate) error_message: Option<String>,
    pub(crate) created_at: f64,
}

/// A row of `assets`.
#[derive(Clone, Debug)]
pub(crate) struct AssetRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) storage_key: String,
    pub(crate) size_bytes: i64,
    pub(crate) tool: String,
    pub(crate) task_id: Option<String>,
    pub(crate) created_at: f64,
}

/// Everything read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) tasks: Vec<TaskRow>,
    pub(crate) runs: Vec<RunRow>,
    pub(crate) audit: Vec<AuditRow>,
    pub(crate) assets: Vec<AssetRow>,
}

fn json_column(text: Option<String>) -> Option<Value> {
    text.and_then(|text| serde_json::from_str(&text).ok())
}

impl Snapshot {
    /// Reads the tables of the schema `url` selects.
    pub(crate) async fn read(url: &str) -> anyhow::Result<Self> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .context("cannot connect to PostgreSQL to read the outcome")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let tasks = client
            .query(
                "SELECT task_id, tool, status, replica_id, arguments::text, result::text, \
                 error::text, extract(epoch FROM created_at)::float8, \
                 extract(epoch FROM last_updated_at)::float8, \
                 extract(epoch FROM cancel_requested_at)::float8 FROM call_tasks",
                &[],
            )
            .await
            .context("cannot read call_tasks")?
            .iter()
            .map(|row| TaskRow {
                id: row.get(0),
                tool: row.get(1),
                status: row.get(2),
                replica_id: row.get(3),
                arguments: json_column(row.get(4)).unwrap_or(Value::Null),
                result: json_column(row.get(5)),
                error: json_column(row.get(6)),
                created_at: row.get(7),
                last_updated_at: row.get(8),
                cancel_requested_at: row.get(9),
            })
            .collect();
        let runs = client
            .query(
                "SELECT id, status, attempt, reclaims, error, error_kind, host_calls, \
                 extract(epoch FROM finished_at)::float8, \
                 extract(epoch FROM cancel_requested_at)::float8 FROM script_runs",
                &[],
            )
            .await
            .context("cannot read script_runs")?
            .iter()
            .map(|row| RunRow {
                id: row.get(0),
                status: row.get(1),
                attempt: row.get(2),
                reclaims: row.get(3),
                error: row.get(4),
                error_kind: row.get(5),
                host_calls: row.get(6),
                finished_at: row.get(7),
                cancel_requested_at: row.get(8),
            })
            .collect();
        let audit = client
            .query(
                "SELECT id, tool, subject, arguments::text, outcome, error_message, \
                 extract(epoch FROM created_at)::float8 FROM audit_logs ORDER BY id",
                &[],
            )
            .await
            .context("cannot read audit_logs")?
            .iter()
            .map(|row| AuditRow {
                id: row.get(0),
                tool: row.get(1),
                subject: row.get(2),
                arguments: json_column(row.get(3)).unwrap_or(Value::Null),
                outcome: row.get(4),
                error_message: row.get(5),
                created_at: row.get(6),
            })
            .collect();
        let assets = client
            .query(
                "SELECT id, name, storage_key, size_bytes, tool, task_id, \
                 extract(epoch FROM created_at)::float8 FROM assets",
                &[],
            )
            .await
            .context("cannot read assets")?
            .iter()
            .map(|row| AssetRow {
                id: row.get(0),
                name: row.get(1),
                storage_key: row.get(2),
                size_bytes: row.get(3),
                tool: row.get(4),
                task_id: row.get(5),
                created_at: row.get(6),
            })
            .collect();
        Ok(Self {
            tasks,
            runs,
            audit,
            assets,
        })
    }
}

impl TaskRow {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "task_id": self.id, "tool": self.tool, "status": self.status,
            "replica_id": self.replica_id, "arguments": self.arguments,
            "result": self.result, "error": self.error, "created_at": self.created_at,
            "last_updated_at": self.last_updated_at,
            "cancel_requested_at": self.cancel_requested_at,
        })
    }
}

impl RunRow {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id, "status": self.status, "attempt": self.attempt,
            "reclaims": self.reclaims, "error": self.error, "error_kind": self.error_kind,
            "host_calls": self.host_calls, "finished_at": self.finished_at,
            "cancel_requested_at": self.cancel_requested_at,
        })
    }
}

impl AuditRow {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id, "tool": self.tool, "subject": self.subject,
            "arguments": self.arguments, "outcome": self.outcome,
            "error_message": self.error_message, "created_at": self.created_at,
        })
    }
}

impl AssetRow {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id, "name": self.name, "storage_key": self.storage_key,
            "size_bytes": self.size_bytes, "tool": self.tool, "task_id": self.task_id,
            "created_at": self.created_at,
        })
    }
}
