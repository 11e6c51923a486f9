//! Query failures as Trino reports them: the `error` object of a FAILED query, with
//! the standard error name, code and type, and the position of the offending text.

use serde_json::{Value, json};

/// Why a query failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// A Trino `StandardErrorCode` name, such as `SYNTAX_ERROR`.
    pub(crate) name: &'static str,
    /// Its numeric code.
    pub(crate) code: i64,
    /// `USER_ERROR`, `INTERNAL_ERROR`, `INSUFFICIENT_RESOURCES` or `EXTERNAL`.
    pub(crate) kind: &'static str,
    /// The message without the position prefix.
    pub(crate) message: String,
    /// `(line, column)` from 1, when the failure is about a piece of the text.
    pub(crate) location: Option<(u32, u32)>,
}

impl Failure {
    /// A user error with a standard name and code.
    pub(crate) fn user(
        name: &'static str,
        code: i64,
        location: Option<(u32, u32)>,
        message: &str,
    ) -> Self {
        Self {
            name,
            code,
            kind: "USER_ERROR",
            message: message.to_owned(),
            location,
        }
    }

    pub(crate) fn syntax(location: (u32, u32), message: &str) -> Self {
        Self::user("SYNTAX_ERROR", 1, Some(location), message)
    }

    pub(crate) fn not_supported(location: (u32, u32), message: &str) -> Self {
        Self::user("NOT_SUPPORTED", 13, Some(location), message)
    }

    /// What a query that received a `DELETE` reports from then on.
    pub(crate) fn user_canceled() -> Self {
        Self::user("USER_CANCELED", 3, None, "Query was canceled")
    }

    /// What Trino's `fail(message)` function raises.
    pub(crate) fn generic_user(message: &str) -> Self {
        Self::user("GENERIC_USER_ERROR", 0, None, message)
    }

    /// What Trino's `AccessDeniedException` reports, such as a denied impersonation:
    /// `Access Denied: ` and `message`.
    pub(crate) fn permission_denied(message: &str) -> Self {
        Self::user(
            "PERMISSION_DENIED",
            4,
            None,
            &format!("Access Denied: {message}"),
        )
    }

    pub(crate) fn internal(message: &str) -> Self {
        Self {
            name: "GENERIC_INTERNAL_ERROR",
            code: 65_536,
            kind: "INTERNAL_ERROR",
            message: message.to_owned(),
            location: None,
        }
    }

    /// The message as Trino words it: located failures start with `line L:C: `.
    pub(crate) fn full_message(&self) -> String {
        match self.location {
            Some((line, column)) => format!("line {line}:{column}: {}", self.message),
            None => self.message.clone(),
        }
    }

    /// The `error` object of a FAILED `QueryResults`.
    pub(crate) fn to_json(&self) -> Value {
        let message = self.full_message();
        let exception = match self.name {
            "SYNTAX_ERROR" => "io.trino.sql.parser.ParsingException",
            "PERMISSION_DENIED" => "io.trino.spi.security.AccessDeniedException",
            _ => "io.trino.spi.TrinoException",
        };
        let mut error = json!({
            "message": message,
            "errorCode": self.code,
            "errorName": self.name,
            "errorType": self.kind,
            "failureInfo": {
                "type": exception,
                "message": message,
                "suppressed": [],
                "stack": [],
            },
        });
        if let Some((line, column)) = self.location {
            let location = json!({ "lineNumber": line, "columnNumber": column });
            error["errorLocation"] = location.clone();
            error["failureInfo"]["errorLocation"] = location;
        }
        error
    }
}
