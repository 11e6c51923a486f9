//! A fake platform for the tests: it records every host call and answers by tool name.

use std::sync::Mutex;

use docket_script::{Host, HostError};
use serde_json::{Map, Value, json};

/// One host call as the fake saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seen {
    Call {
        tool: String,
        args: Value,
    },
    Query {
        sql: String,
        connection: Option<String>,
        params: Map<String, Value>,
    },
    Export {
        name: String,
        rows: Value,
        format: String,
    },
}

/// Answers `platform.call` by tool name: `echo` returns its arguments, `text` a plain-text
/// result, `refuse` a tool error, `broken` a platform fault, `panic` panics, `hang` never
/// answers. Queries return
/// two sales rows; exports return an asset.
///
/// Every `platform.call` that arrives also signals [`FakeHost::called`], so a test can act
/// once the script has reached a call instead of guessing how long that takes.
#[derive(Debug, Default)]
pub(crate) struct FakeHost {
    pub(crate) seen: Mutex<Vec<Seen>>,
    called: tokio::sync::Notify,
}

impl FakeHost {
    /// Waits until a `platform.call` has arrived (at once if one arrived already and
    /// nobody waited for it).
    pub(crate) async fn called(&self) {
        self.called.notified().await;
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }

    fn record(&self, seen: Seen) {
        if let Ok(mut all) = self.seen.lock() {
            all.push(seen);
        }
    }
}

#[async_trait::async_trait]
impl Host for FakeHost {
    async fn call(&self, tool: String, args: Value) -> Result<Value, HostError> {
        self.record(Seen::Call {
            tool: tool.clone(),
            args: args.clone(),
        });
        // A permit is kept when nobody waits yet, so the signal is never lost.
        self.called.notify_one();
        match tool.as_str() {
            "echo" => Ok(args),
            "text" => Ok(json!({"text": "plain words"})),
            "refuse" => Err(HostError::Tool(
                "the persona may not call this tool".to_owned(),
            )),
            "broken" => Err(HostError::Platform("the database is down".to_owned())),
            "panic" => panic!("the fake host panics on purpose"),
            "hang" => std::future::pending().await,
            other => Err(HostError::Tool(format!("unknown tool {other}"))),
        }
    }

    async fn query(
        &self,
        sql: String,
        connection: Option<String>,
        params: Map<String, Value>,
    ) -> Result<Value, HostError> {
        self.record(Seen::Query {
            sql,
            connection,
            params,
        });
        Ok(json!({
            "columns": ["region", "total"],
            "rows": [
                {"region": "north", "total": "12.50"},
                {"region": "south", "total": "7.25"},
            ],
            "row_count": 2,
            "truncated": false,
        }))
    }

    async fn export(&self, name: String, rows: Value, format: String) -> Result<Value, HostError> {
        let row_count = rows.as_array().map_or(0, Vec::len);
        self.record(Seen::Export {
            name: name.clone(),
            rows,
            format: format.clone(),
        });
        Ok(json!({"asset_id": "asset-1", "name": name, "format": format, "row_count": row_count}))
    }
}
