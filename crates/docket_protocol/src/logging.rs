//! Log messages a server sends its client (`notifications/message`), on the SSE
//! stream of the request they belong to, for clients that asked for them: by
//! `logging/setLevel` in a session of the earlier era, or by
//! `_meta["io.modelcontextprotocol/logLevel"]` on a request of the current one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The method of a log notification.
pub const LOG_MESSAGE_METHOD: &str = "notifications/message";

/// The severity of a log message (RFC 5424's levels), least severe first, so that
/// `level >= minimum` says whether a message goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detailed debugging information.
    Debug,
    /// Normal operation.
    Info,
    /// Normal but significant.
    Notice,
    /// A warning.
    Warning,
    /// An error.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    /// The level called `name`, if there is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.as_str() == name)
    }
}

/// The params of `notifications/message`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoggingMessageParams {
    /// How severe it is.
    pub level: LogLevel,
    /// Which part of the server logged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// What was logged: any JSON value.
    pub data: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_their_names_and_order_by_severity() {
        for level in LogLevel::ALL {
            assert_eq!(LogLevel::parse(level.as_str()), Some(level));
            assert_eq!(
                serde_json::to_value(level).ok(),
                Some(Value::String(level.as_str().to_owned()))
            );
        }
        assert_eq!(LogLevel::parse("loud"), None);
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Alert < LogLevel::Emergency);
    }
}
