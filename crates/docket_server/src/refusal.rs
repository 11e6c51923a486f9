//! Platform refusals: every tool-level failure Docket answers is one of these kinds,
//! each with its fixed `code` and `category`, so the pipeline and every tool answer
//! the same error contract: `isError: true`, a text block
//! `"<message> (code: <code>) Hint: <hint>"`, and
//! `structuredContent: {error: {code, category, message, hint}}`.

use docket_protocol::tools::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

/// What kind of refusal or failure a tool result reports.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The caller's persona does not allow the tool or the connection.
    Unauthorized,
    /// A persona or connection rule refuses this route or path.
    NotAllowed,
    /// Too many calls in a short window.
    RateLimited,
    /// The arguments are well-formed JSON but not acceptable.
    InvalidArguments,
    /// The call names no connection and there is no single one to fall back to.
    ConnectionRequired,
    /// A GraphQL document that cannot be sent (syntax, a mutation, an unknown operation).
    InvalidQuery,
    /// A script source that does not parse or breaks the script contract.
    InvalidScript,
    /// SQL that is not a read-only statement.
    ReadOnly,
    /// The name is taken.
    AlreadyExists,
    /// The caller already holds as many of these as one identity may.
    LimitReached,
    /// Nothing by that name or id is visible to the caller.
    NotFound,
    /// The feature needs configuration this server does not have.
    NotConfigured,
    /// The user declined the consent the call asked for.
    UserDeclined,
    /// The query failed where it ran.
    QueryFailed,
    /// An export could not be completed.
    ExportFailed,
    /// The tool could not do what was asked (a disabled script, a failed run).
    ToolError,
    /// The upstream service answered with a failure.
    UpstreamFailed,
    /// The upstream service did not answer in time.
    UpstreamTimeout,
    /// The upstream service answered with more than the limit allows.
    TooLarge,
    /// The GraphQL server answered with errors and no data.
    GraphqlErrors,
    /// A store the tool needs is unavailable; trying again may work.
    Unavailable,
    /// The replica has no free slot for this kind of work right now.
    Busy,
    /// Writing an export's bytes or its row failed.
    StorageFailed,
    /// Something that should not happen did.
    Internal,
}

impl Refusal {
    /// The `code` of the structured error.
    pub fn code(self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::NotAllowed => "not_allowed",
            Self::RateLimited => "rate_limited",
            Self::InvalidArguments => "invalid_arguments",
            Self::ConnectionRequired => "connection_required",
            Self::InvalidQuery => "invalid_query",
            Self::InvalidScript => "invalid_script",
            Self::ReadOnly => "read_only",
            Self::AlreadyExists => "already_exists",
            Self::LimitReached => "limit_reached",
            Self::NotFound => "not_found",
            Self::NotConfigured => "not_configured",
            Self::UserDeclined => "user_declined",
            Self::QueryFailed => "query_failed",
            Self::ExportFailed => "export_failed",
            Self::ToolError => "tool_error",
            Self::UpstreamFailed => "upstream_failed",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::TooLarge => "too_large",
            Self::GraphqlErrors => "graphql_errors",
            Self::Unavailable | Self::Busy => "unavailable",
            Self::StorageFailed => "storage_failed",
            Self::Internal => "internal",
        }
    }

    /// The `category` of the structured error: who can do something about it.
    pub fn category(self) -> &'static str {
        match self {
            Self::Unauthorized | Self::NotAllowed => "authorization_denied",
            Self::RateLimited | Self::Busy => "rate_limited",
            Self::InvalidArguments
            | Self::ConnectionRequired
            | Self::InvalidQuery
            | Self::InvalidScript
            | Self::ReadOnly
            | Self::AlreadyExists
            | Self::LimitReached => "client_input",
            Self::NotFound => "not_found",
            Self::NotConfigured => "feature_unavailable",
            Self::UserDeclined => "user_declined",
            Self::QueryFailed | Self::ExportFailed | Self::ToolError => "tool_error",
            Self::UpstreamFailed | Self::UpstreamTimeout | Self::TooLarge | Self::GraphqlErrors => {
                "upstream"
            }
            Self::Unavailable | Self::StorageFailed | Self::Internal => "internal",
        }
    }

    /// The tool result of this refusal.
    pub fn result(self, message: &str, hint: &str) -> CallToolResult {
        let code = self.code();
        let mut result = CallToolResult::from_content(vec![ContentBlock::text(format!(
            "{message} (code: {code}) Hint: {hint}"
        ))]);
        result.is_error = Some(true);
        result.structured_content = Some(json!({ "error": {
            "code": code,
            "category": self.category(),
            "message": message,
            "hint": hint,
        } }));
        result
    }
}

/// The JSON Schema of a refusal's `structuredContent`: `{error: {code, category,
/// message, hint}}`. The error object may carry more (a patch's `edit`, a
/// script's `line`); `code` is open because script patches have codes of their
/// own (`PATCH_*`). Besides `error` a GraphQL export's failure carries the
/// endpoint's `errors`.
pub(crate) fn error_schema() -> Value {
    let text = |what: &str| json!({"type": "string", "description": what});
    json!({
        "type": "object",
        "description": "A refusal or failure (isError: true).",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": text("What went wrong, stable for programs (e.g. not_found)."),
                    "category": {
                        "type": "string",
                        "description": "Who can do something about it.",
                        "enum": [
                            "authorization_denied", "rate_limited", "client_input", "not_found",
                            "feature_unavailable", "user_declined", "tool_error", "upstream",
                            "internal"
                        ]
                    },
                    "message": text("What went wrong, for people."),
                    "hint": text("What to do next."),
                },
                "required": ["code", "category", "message", "hint"]
            },
            "errors": {
                "type": "array",
                "description": "A GraphQL endpoint's errors, as it sent them."
            }
        },
        "required": ["error"]
    })
}

/// A tool's `outputSchema` from the shape of its successful `structuredContent`:
/// that shape, or a refusal's ([`error_schema`]), since any call can be refused.
pub(crate) fn output_schema(success: Value) -> Value {
    json!({
        "type": "object",
        "anyOf": [success, error_schema()]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_conforms_to_the_error_schema() {
        let validator = jsonschema::draft202012::new(&error_schema()).expect("compiles");
        for refusal in [
            Refusal::Unauthorized,
            Refusal::NotAllowed,
            Refusal::RateLimited,
            Refusal::InvalidArguments,
            Refusal::ConnectionRequired,
            Refusal::InvalidQuery,
            Refusal::InvalidScript,
            Refusal::ReadOnly,
            Refusal::AlreadyExists,
            Refusal::LimitReached,
            Refusal::NotFound,
            Refusal::NotConfigured,
            Refusal::UserDeclined,
            Refusal::QueryFailed,
            Refusal::ExportFailed,
            Refusal::ToolError,
            Refusal::UpstreamFailed,
            Refusal::UpstreamTimeout,
            Refusal::TooLarge,
            Refusal::GraphqlErrors,
            Refusal::Unavailable,
            Refusal::Busy,
            Refusal::StorageFailed,
            Refusal::Internal,
        ] {
            let result = refusal.result("no", "Do something else.");
            let structured = result.structured_content.expect("structured");
            assert!(validator.is_valid(&structured), "{refusal:?}: {structured}");
        }
    }

    #[test]
    fn a_refusal_carries_its_code_and_category_in_text_and_structure() {
        let result = Refusal::Busy.result("too many drafts", "Try again.");
        assert_eq!(result.is_error, Some(true));
        let value = serde_json::to_value(&result).expect("serializes");
        assert_eq!(
            value["content"][0]["text"],
            "too many drafts (code: unavailable) Hint: Try again."
        );
        assert_eq!(
            value["structuredContent"]["error"],
            json!({"code": "unavailable", "category": "rate_limited",
                   "message": "too many drafts", "hint": "Try again."})
        );
    }
}
