//! Task records as the tasks extension puts them on the wire: `Task`,
//! `CreateTaskResult` and `GetTaskResult`.

use docket_protocol::error::ErrorObject;
use docket_protocol::mrtr::InputRequests;
use docket_protocol::result::ResultType;
use docket_protocol::tasks::{
    CreateTaskResult, GetTaskResult, Task, TaskDetail, TaskStatus as WireStatus,
};
use docket_task::{TaskError, TaskRecord, TaskStatus, TaskView};
use time::format_description::well_known::Rfc3339;

fn timestamp(time: time::OffsetDateTime) -> String {
    time.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

fn wire_status(status: TaskStatus) -> WireStatus {
    match status {
        TaskStatus::Working => WireStatus::Working,
        TaskStatus::InputRequired => WireStatus::InputRequired,
        TaskStatus::Completed => WireStatus::Completed,
        TaskStatus::Failed => WireStatus::Failed,
        TaskStatus::Cancelled => WireStatus::Cancelled,
    }
}

fn wire_task(record: &TaskRecord, status: TaskStatus, status_message: Option<String>) -> Task {
    Task {
        task_id: record.id.to_string(),
        status: wire_status(status),
        status_message,
        created_at: timestamp(record.created_at),
        last_updated_at: timestamp(record.last_updated_at),
        ttl_ms: record.ttl_ms(),
        poll_interval_ms: Some(record.poll_interval_ms),
    }
}

fn wire_error(error: TaskError) -> ErrorObject {
    ErrorObject {
        code: error.code,
        message: error.message,
        data: error.data,
    }
}

/// The task as `view` shows it, in the current era's `Task` shape (the earlier era
/// renames its fields, `legacy::legacy_task`).
pub(crate) fn viewed_task(record: &TaskRecord, view: &TaskView) -> Task {
    wire_task(record, view.status, view.status_message.clone())
}

/// The `CreateTaskResult` for a freshly committed task.
pub(crate) fn create_result(record: &TaskRecord) -> CreateTaskResult {
    CreateTaskResult::new(wire_task(
        record,
        record.status,
        record.status_message.clone(),
    ))
}

/// The `GetTaskResult` for a task as `view` shows it; the record's result moves into it.
pub(crate) fn get_result(mut record: TaskRecord, view: TaskView) -> GetTaskResult {
    let detail = match view.status {
        TaskStatus::Completed => TaskDetail {
            result: record.result.take(),
            error: None,
            input_requests: None,
        },
        TaskStatus::Failed => TaskDetail {
            result: None,
            error: view.error.map(wire_error),
            input_requests: None,
        },
        TaskStatus::InputRequired => TaskDetail {
            result: None,
            error: None,
            input_requests: record
                .input_requests
                .take()
                .and_then(|requests| serde_json::from_value::<InputRequests>(requests).ok()),
        },
        TaskStatus::Working | TaskStatus::Cancelled => TaskDetail {
            result: None,
            error: None,
            input_requests: None,
        },
    };
    GetTaskResult {
        result_type: ResultType::Complete,
        task: wire_task(&record, view.status, view.status_message),
        detail,
    }
}
