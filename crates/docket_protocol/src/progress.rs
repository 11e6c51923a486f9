//! Progress notifications, sent on a request's own SSE stream.

use serde::{Deserialize, Serialize};

use serde_json::Number;

use crate::meta::ProgressToken;

/// The method of a progress notification.
pub const PROGRESS_METHOD: &str = "notifications/progress";

/// The params of `notifications/progress`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    /// The token from the request's `_meta`.
    pub progress_token: ProgressToken,
    /// Progress so far; increases with every notification. A JSON number, kept
    /// exactly as written (integers stay integers).
    pub progress: Number,
    /// The total, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Number>,
    /// A human-readable description of the progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
