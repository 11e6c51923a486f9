//! The JSON-RPC 2.0 envelope: requests, notifications and responses.
//!
//! Streamable HTTP carries exactly one message per POST, so parsing takes one
//! JSON value and classifies it; batches and responses sent by a client are
//! invalid requests here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorObject;

/// A request id: a string or an integer, never null.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

/// A request from the client: it has an id and expects exactly one response.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The id echoed in the response.
    pub id: RequestId,
    /// The method name, for example `tools/call`.
    pub method: String,
    /// The params object; `None` when the client sent none.
    pub params: Option<Value>,
}

/// A notification from the client: no id, no response.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The params object, if any.
    pub params: Option<Value>,
}

/// One message a client may send over Streamable HTTP.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientMessage {
    /// A request expecting a response.
    Request(Request),
    /// A notification.
    Notification(Notification),
}

/// Why a body is not a single JSON-RPC request or notification.
#[derive(Clone, Debug, PartialEq)]
pub enum MessageError {
    /// The body is not JSON at all (-32700).
    Parse(String),
    /// The body is JSON but not a valid request object (-32600). Carries the id
    /// when one could be read, so the error can echo it.
    Invalid {
        /// The id of the message, when it had a usable one.
        id: Option<RequestId>,
        /// What is wrong, for the error message.
        reason: String,
    },
}

impl ClientMessage {
    /// Parses one client message from raw bytes.
    ///
    /// # Errors
    /// [`MessageError::Parse`] for invalid JSON, [`MessageError::Invalid`] for JSON that
    /// is not one JSON-RPC 2.0 request or notification (batches and responses included).
    pub fn parse(bytes: &[u8]) -> Result<Self, MessageError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|err| MessageError::Parse(err.to_string()))?;
        Self::from_value(value)
    }

    /// Classifies an already parsed JSON value.
    ///
    /// # Errors
    /// [`MessageError::Invalid`] when the value is not a request or notification.
    pub fn from_value(value: Value) -> Result<Self, MessageError> {
        let Value::Object(mut object) = value else {
            let reason = if value.is_array() {
                "batches are not supported: send one JSON-RPC message per request"
            } else {
                "a JSON-RPC message must be an object"
            };
            return Err(MessageError::Invalid {
                id: None,
                reason: reason.into(),
            });
        };
        let id = match object.remove("id") {
            None => None,
            Some(raw) => match serde_json::from_value::<RequestId>(raw) {
                Ok(id) => Some(id),
                Err(_) => {
                    return Err(MessageError::Invalid {
                        id: None,
                        reason: "the id must be a string or an integer".into(),
                    });
                }
            },
        };
        let invalid = |reason: &str| MessageError::Invalid {
            id: id.clone(),
            reason: reason.into(),
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid("jsonrpc must be \"2.0\""));
        }
        if object.contains_key("result") || object.contains_key("error") {
            return Err(invalid(
                "the server accepts requests and notifications, not responses",
            ));
        }
        let method = match object.remove("method") {
            Some(Value::String(method)) => method,
            _ => return Err(invalid("method must be a string")),
        };
        let params = object.remove("params");
        if params.as_ref().is_some_and(|params| !params.is_object()) {
            return Err(invalid("params must be an object"));
        }
        Ok(match id {
            Some(id) => ClientMessage::Request(Request { id, method, params }),
            None => ClientMessage::Notification(Notification { method, params }),
        })
    }
}

/// A response to a request: a result or an error, never both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpcVersion,
    /// The request's id; `None` (serialized as null) when the request's id could not be read.
    pub id: Option<RequestId>,
    /// The outcome.
    #[serde(flatten)]
    pub body: ResponseBody,
}

/// The outcome carried by a [`Response`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseBody {
    /// A successful result object.
    Result(Value),
    /// An error object.
    Error(ErrorObject),
}

impl Response {
    /// A successful response.
    pub fn result(id: RequestId, result: Value) -> Self {
        Self {
            jsonrpc: JsonRpcVersion,
            id: Some(id),
            body: ResponseBody::Result(result),
        }
    }

    /// An error response; `id` is `None` when the request's id is unknown.
    pub fn error(id: Option<RequestId>, error: ErrorObject) -> Self {
        Self {
            jsonrpc: JsonRpcVersion,
            id,
            body: ResponseBody::Error(error),
        }
    }
}

/// A notification the server sends on a response stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutgoingNotification {
    /// Always `"2.0"`.
    pub jsonrpc: JsonRpcVersion,
    /// The method, for example `notifications/progress`.
    pub method: String,
    /// The params object.
    pub params: Value,
}

/// The literal `"2.0"`, checked on the way in and written on the way out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonRpcVersion;

impl Serialize for JsonRpcVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("2.0")
    }
}

impl<'de> Deserialize<'de> for JsonRpcVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let version = String::deserialize(deserializer)?;
        if version == "2.0" {
            Ok(JsonRpcVersion)
        } else {
            Err(serde::de::Error::custom("jsonrpc must be \"2.0\""))
        }
    }
}

#[cfg(test)]
mod generated {
    //! Property tests at the envelope parser: no input panics it, and what it
    //! accepts is what JSON-RPC 2.0 allows.

    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    use super::*;
    use crate::meta::RequestMeta;

    /// Arbitrary JSON, nested a few levels.
    fn json_value() -> impl Strategy<Value = Value> {
        crate::arbitrary::json_value("[a-z_/.]{0,10}".prop_map(String::from))
    }

    /// Envelopes close to valid ones, with fields that are right, wrong or missing.
    fn envelope() -> impl Strategy<Value = Value> {
        (
            prop_oneof![Just(json!("2.0")), Just(json!("1.0")), json_value()],
            proptest::option::of(prop_oneof![
                any::<i64>().prop_map(|n| json!(n)),
                json_value()
            ]),
            prop_oneof![
                Just(json!("tools/call")),
                Just(json!("tasks/get")),
                json_value()
            ],
            proptest::option::of(json_value()),
            any::<bool>(),
        )
            .prop_map(|(version, id, method, params, response)| {
                let mut object = Map::new();
                object.insert("jsonrpc".into(), version);
                if let Some(id) = id {
                    object.insert("id".into(), id);
                }
                object.insert("method".into(), method);
                if let Some(params) = params {
                    object.insert("params".into(), params);
                }
                if response {
                    object.insert("result".into(), json!({}));
                }
                Value::Object(object)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn no_bytes_panic_the_parser(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = ClientMessage::parse(&bytes);
        }

        /// An accepted message was a JSON-RPC 2.0 request or notification: version
        /// "2.0", a string method, no result or error; a request's id is a string or
        /// an integer.
        #[test]
        fn only_requests_and_notifications_are_accepted(value in envelope()) {
            let text = value.to_string();
            if ClientMessage::parse(text.as_bytes()).is_ok() {
                prop_assert_eq!(value.get("jsonrpc"), Some(&json!("2.0")));
                prop_assert!(value.get("method").is_some_and(Value::is_string));
                prop_assert!(value.get("result").is_none());
                if let Some(id) = value.get("id") {
                    prop_assert!(id.is_string() || id.is_i64() || id.is_u64(), "{id}");
                }
            }
        }

        #[test]
        fn no_params_panic_the_meta_reader(params in proptest::option::of(json_value())) {
            let _ = RequestMeta::from_params(params.as_ref());
            let wrapped = params.map(|meta| json!({"_meta": meta}));
            let _ = RequestMeta::from_params(wrapped.as_ref());
        }
    }
}
