//! The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a call that
//! runs long is answered with a task handle, and the client follows it with
//! `tasks/get`, answers its input requests with `tasks/update`, and stops it with
//! `tasks/cancel`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorObject;
use crate::mrtr::{InputRequests, InputResponses};
use crate::result::ResultType;

/// Method name of `tasks/get`.
pub const TASKS_GET: &str = "tasks/get";
/// Method name of `tasks/update`.
pub const TASKS_UPDATE: &str = "tasks/update";
/// Method name of `tasks/cancel`.
pub const TASKS_CANCEL: &str = "tasks/cancel";

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the client to answer input requests.
    InputRequired,
    /// Ended with a result (which may be a tool error).
    Completed,
    /// Ended with a JSON-RPC error.
    Failed,
    /// Ended by a cancel.
    Cancelled,
}

/// The fields every task carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's id.
    pub task_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// What is happening, in words; the progress channel of a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When it was created (RFC 3339, UTC).
    pub created_at: String,
    /// When it last changed (RFC 3339, UTC).
    pub last_updated_at: String,
    /// How long after creation it may be discarded, in milliseconds; null for unlimited.
    /// Always serialized, null included.
    pub ttl_ms: Option<u64>,
    /// How often to poll, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
}

/// The answer to a call that became a task: the task, flat, with `resultType: "task"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskResult {
    /// Always [`ResultType::Task`].
    pub result_type: ResultType,
    /// The task.
    #[serde(flatten)]
    pub task: Task,
}

impl CreateTaskResult {
    /// The handle for `task`.
    pub fn new(task: Task) -> Self {
        Self {
            result_type: ResultType::Task,
            task,
        }
    }
}

/// The status-specific part of a task as `tasks/get` reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDetail {
    /// The final result, when `completed`: the `CallToolResult` of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error, when `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// The outstanding requests, when `input_required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
}

/// The result of `tasks/get`: `resultType: "complete"` and the detailed task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Its status-specific fields.
    #[serde(flatten)]
    pub detail: TaskDetail,
}

/// The params of `tasks/get` and `tasks/cancel`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    /// The task.
    pub task_id: String,
}

/// The params of `tasks/update`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task.
    pub task_id: String,
    /// Answers to outstanding input requests; unknown keys are ignored.
    pub input_responses: InputResponses,
}
