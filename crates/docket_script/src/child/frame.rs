//! The messages between a run's child process and its parent, and how they cross the pipes:
//! each is a 4-byte big-endian length followed by that many bytes of JSON, at most
//! [`MAX_FRAME_BYTES`] either way. A length over the cap is refused before a byte of the body
//! is read, so neither side ever allocates more than one capped frame on the other's behalf.
//!
//! The enums are externally tagged on purpose: serde buffers internally tagged and untagged
//! enums through a generic value, which loses numbers under serde_json's
//! `arbitrary_precision` (on in every build, through starlark).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{LimitKind, Limits, ScriptFailure, ScriptReport, SyntaxError};

/// The largest message either side sends: a host call's arguments, its answer, or the report.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// What the parent sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ToChild {
    /// The one run the child carries out; always the first message.
    Start {
        source: String,
        run_id: String,
        params: Map<String, Value>,
        #[serde(default)]
        fire_time: Option<String>,
        limits: WireLimits,
    },
    /// The answer to the host call numbered `call`.
    Reply { call: u64, answer: Answer },
    /// Stop the run: cancelled, out of time or shutting down. The parent kills the child
    /// shortly after, whether or not it stopped.
    Stop,
}

/// What the child sends.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FromChild {
    /// A `platform.*` call, numbered from 1; the script waits for its reply.
    Call { call: u64, request: HostRequest },
    /// How the run ended; always the last message.
    Report { report: WireReport },
}

/// One `platform.*` call.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HostRequest {
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

/// A host call's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Answer {
    Value(Value),
    Tool(String),
    Platform(String),
}

/// [`Limits`] as they cross the pipe.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireLimits {
    max_steps: u64,
    wall_time_ms: u64,
    max_heap_bytes: u64,
    max_log_bytes: u64,
    max_source_bytes: u64,
}

impl From<&Limits> for WireLimits {
    fn from(limits: &Limits) -> Self {
        let bytes = |value: usize| u64::try_from(value).unwrap_or(u64::MAX);
        Self {
            max_steps: limits.max_steps,
            wall_time_ms: u64::try_from(limits.wall_time.as_millis()).unwrap_or(u64::MAX),
            max_heap_bytes: bytes(limits.max_heap_bytes),
            max_log_bytes: bytes(limits.max_log_bytes),
            max_source_bytes: bytes(limits.max_source_bytes),
        }
    }
}

impl From<&WireLimits> for Limits {
    fn from(wire: &WireLimits) -> Self {
        let bytes = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        Self {
            max_steps: wire.max_steps,
            wall_time: std::time::Duration::from_millis(wire.wall_time_ms),
            max_heap_bytes: bytes(wire.max_heap_bytes),
            max_log_bytes: bytes(wire.max_log_bytes),
            max_source_bytes: bytes(wire.max_source_bytes),
        }
    }
}

/// [`ScriptReport`] as it crosses the pipe.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireReport {
    outcome: WireOutcome,
    log: String,
    log_truncated: bool,
    steps: u64,
    host_calls: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WireOutcome {
    Value(Value),
    Syntax { message: String, line: Option<u32> },
    Error(String),
    Limit { limit: WireLimit, message: String },
    Cancelled,
    Platform(String),
    Crashed(String),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WireLimit {
    Steps,
    WallTime,
    Heap,
    Log,
    Source,
}

impl From<ScriptReport> for WireReport {
    fn from(report: ScriptReport) -> Self {
        let outcome = match report.outcome {
            Ok(value) => WireOutcome::Value(value),
            Err(ScriptFailure::Syntax(error)) => WireOutcome::Syntax {
                message: error.message,
                line: error.line,
            },
            Err(ScriptFailure::Error { message }) => WireOutcome::Error(message),
            Err(ScriptFailure::Limit { limit, message }) => WireOutcome::Limit {
                limit: match limit {
                    LimitKind::Steps => WireLimit::Steps,
                    LimitKind::WallTime => WireLimit::WallTime,
                    LimitKind::Heap => WireLimit::Heap,
                    LimitKind::Log => WireLimit::Log,
                    LimitKind::Source => WireLimit::Source,
                },
                message,
            },
            Err(ScriptFailure::Cancelled) => WireOutcome::Cancelled,
            Err(ScriptFailure::Platform(message)) => WireOutcome::Platform(message),
            Err(ScriptFailure::Crashed { message }) => WireOutcome::Crashed(message),
        };
        Self {
            outcome,
            log: report.log,
            log_truncated: report.log_truncated,
            steps: report.steps,
            host_calls: report.host_calls,
        }
    }
}

impl From<WireReport> for ScriptReport {
    fn from(wire: WireReport) -> Self {
        let outcome = match wire.outcome {
            WireOutcome::Value(value) => Ok(value),
            WireOutcome::Syntax { message, line } => {
                Err(ScriptFailure::Syntax(SyntaxError { message, line }))
            }
            WireOutcome::Error(message) => Err(ScriptFailure::Error { message }),
            WireOutcome::Limit { limit, message } => Err(ScriptFailure::Limit {
                limit: match limit {
                    WireLimit::Steps => LimitKind::Steps,
                    WireLimit::WallTime => LimitKind::WallTime,
                    WireLimit::Heap => LimitKind::Heap,
                    WireLimit::Log => LimitKind::Log,
                    WireLimit::Source => LimitKind::Source,
                },
                message,
            }),
            WireOutcome::Cancelled => Err(ScriptFailure::Cancelled),
            WireOutcome::Platform(message) => Err(ScriptFailure::Platform(message)),
            WireOutcome::Crashed(message) => Err(ScriptFailure::Crashed { message }),
        };
        Self {
            outcome,
            log: wire.log,
            log_truncated: wire.log_truncated,
            steps: wire.steps,
            host_calls: wire.host_calls,
        }
    }
}

/// Why a message could not be sent or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The message is over [`MAX_FRAME_BYTES`].
    #[error("a message of {bytes} bytes is over the limit of {MAX_FRAME_BYTES} bytes")]
    TooLarge {
        /// Its size.
        bytes: usize,
    },
    /// The pipe failed.
    #[error("the pipe failed: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not the message expected.
    #[error("a malformed message: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// `message` as one frame (length and body), or [`FrameError::TooLarge`].
pub(crate) fn encode(message: &impl Serialize) -> Result<Vec<u8>, FrameError> {
    let mut frame = vec![0; 4];
    serde_json::to_writer(&mut frame, message)?;
    let bytes = frame.len() - 4;
    let length = u32::try_from(bytes)
        .ok()
        .filter(|_| bytes <= MAX_FRAME_BYTES)
        .ok_or(FrameError::TooLarge { bytes })?;
    frame[..4].copy_from_slice(&length.to_be_bytes());
    Ok(frame)
}

/// The next message, or `None` when the pipe ended cleanly between messages.
pub(crate) async fn read<T: DeserializeOwned>(
    reader: &mut (impl AsyncRead + Unpin),
) -> Result<Option<T>, FrameError> {
    let mut header = [0u8; 4];
    match reader.read_exact(&mut header).await {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error.into()),
    }
    let bytes = usize::try_from(u32::from_be_bytes(header)).unwrap_or(usize::MAX);
    if bytes > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge { bytes });
    }
    let mut body = vec![0; bytes];
    reader.read_exact(&mut body).await?;
    Ok(Some(serde_json::from_slice(&body)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(message: &ToChild) -> ToChild {
        let frame = encode(message).expect("encodes");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime
            .block_on(read::<ToChild>(&mut frame.as_slice()))
            .expect("reads")
            .expect("one message")
    }

    #[test]
    fn a_scheduled_runs_fire_time_crosses_to_the_child() {
        let start = ToChild::Start {
            source: "print(run.fire_time)".into(),
            run_id: "run-1".into(),
            params: Map::new(),
            fire_time: Some("2026-06-01T04:00:00Z".into()),
            limits: WireLimits::from(&Limits::run()),
        };
        let ToChild::Start { fire_time, .. } = round_trip(&start) else {
            panic!("not a start");
        };
        assert_eq!(fire_time.as_deref(), Some("2026-06-01T04:00:00Z"));
    }

    #[test]
    fn numbers_and_text_cross_unchanged() {
        let value: Value = serde_json::from_str(
            r#"{"big": 123456789012345678901234567890, "f": 1.50, "s": "é\n"}"#,
        )
        .expect("json");
        let ToChild::Reply {
            call,
            answer: Answer::Value(back),
        } = round_trip(&ToChild::Reply {
            call: 7,
            answer: Answer::Value(value.clone()),
        })
        else {
            panic!("not a reply");
        };
        assert_eq!(call, 7);
        assert_eq!(back, value);
    }

    #[test]
    fn a_length_over_the_cap_is_refused_before_the_body_is_read() {
        let mut frame = u32::try_from(MAX_FRAME_BYTES + 1)
            .expect("fits")
            .to_be_bytes()
            .to_vec();
        frame.extend_from_slice(b"{}");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let read = runtime.block_on(read::<ToChild>(&mut frame.as_slice()));
        assert!(
            matches!(read, Err(FrameError::TooLarge { bytes }) if bytes == MAX_FRAME_BYTES + 1)
        );
    }

    #[test]
    fn a_message_over_the_cap_is_not_encoded() {
        let huge = ToChild::Reply {
            call: 1,
            answer: Answer::Value(Value::String("x".repeat(MAX_FRAME_BYTES))),
        };
        assert!(matches!(encode(&huge), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn a_clean_end_between_messages_is_none_and_a_torn_one_an_error() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let empty: &[u8] = &[];
        assert!(matches!(
            runtime.block_on(read::<ToChild>(&mut &*empty)),
            Ok(None)
        ));
        let torn = encode(&ToChild::Stop).expect("encodes");
        let torn = &torn[..torn.len() - 1];
        assert!(runtime.block_on(read::<ToChild>(&mut &*torn)).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever a child writes, the parent's reader answers a message, the end, or an
        /// error, and never allocates past the cap: it does not panic.
        #[test]
        fn any_bytes_read_as_a_message_the_end_or_an_error(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            length in proptest::option::of(0u32..64),
        ) {
            let mut input = length.map(|length| length.to_be_bytes().to_vec()).unwrap_or_default();
            input.extend_from_slice(&bytes);
            let runtime = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            let mut reader = input.as_slice();
            for _ in 0..input.len() + 1 {
                match runtime.block_on(read::<FromChild>(&mut reader)) {
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }

        /// Any text and call number a reply carries crosses unchanged.
        #[test]
        fn replies_round_trip(call in proptest::prelude::any::<u64>(), text in ".{0,64}") {
            let ToChild::Reply { call: back, answer: Answer::Tool(message) } =
                round_trip(&ToChild::Reply { call, answer: Answer::Tool(text.clone()) })
            else {
                panic!("not a reply");
            };
            proptest::prop_assert_eq!((back, message), (call, text));
        }
    }
}
