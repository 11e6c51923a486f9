//! Per-request `_meta`: the protocol version, client capabilities, client info and
//! progress token every 2026-07-28 request carries, since there is no `initialize`.

use serde::{Deserialize, Serialize};

mod de;
use serde_json::Value;

use crate::JsonObject;

/// `_meta` key of the protocol version (required on every request).
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client capabilities (required on every request).
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's name and version (optional).
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the (deprecated) log level a client opts into.
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of the server's name and version, on every result.
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key of the progress token a request opts into progress with.
pub const PROGRESS_TOKEN_KEY: &str = "progressToken";
/// `_meta` key of the W3C Trace Context `traceparent` a request joins a trace with.
pub const TRACEPARENT_KEY: &str = "traceparent";
/// `_meta` key of the W3C Trace Context `tracestate` beside it.
pub const TRACESTATE_KEY: &str = "tracestate";

/// The trace context a request's `params._meta` carries, as sent: its `traceparent`
/// and `tracestate`, each only when it is a string. Never an error, in either
/// protocol era: whether a value is valid is the reader's to decide, and an invalid
/// one is ignored, never refused.
pub fn trace_context(params: Option<&Value>) -> (Option<&str>, Option<&str>) {
    let meta = params.and_then(|params| params.get("_meta"));
    let text = |key| meta.and_then(|meta| meta.get(key)).and_then(Value::as_str);
    (text(TRACEPARENT_KEY), text(TRACESTATE_KEY))
}

/// The name and version of a client or server.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Any further fields (title, icons, website), kept as sent.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl Implementation {
    /// An implementation with just a name and version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            extra: JsonObject::new(),
        }
    }
}

/// What a client declares it can do, for this one request.
///
/// Unknown keys and sub-keys are kept, because clients send more than this server reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClientCapabilities {
    /// Elicitation support; `{}` means form mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
    /// Sampling support (deprecated in 2026-07-28 but still declared by clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Value>,
    /// Roots support (deprecated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<Value>,
    /// Extensions by identifier, for example `io.modelcontextprotocol/tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<JsonObject>,
    /// Any other capability, kept as sent.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The elicitation modes a client supports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ElicitationCapability {
    /// Form mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<Value>,
    /// URL mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<Value>,
    /// Other fields, kept as sent.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ClientCapabilities {
    /// Capabilities declaring one extension and nothing else.
    pub fn with_extension(extension: &str) -> Self {
        let mut extensions = JsonObject::new();
        extensions.insert(extension.to_owned(), Value::Object(JsonObject::new()));
        Self {
            extensions: Some(extensions),
            ..Self::default()
        }
    }

    /// Capabilities declaring sampling and nothing else.
    pub fn with_sampling() -> Self {
        Self {
            sampling: Some(Value::Object(JsonObject::new())),
            ..Self::default()
        }
    }

    /// Capabilities declaring form elicitation and nothing else.
    pub fn with_elicitation() -> Self {
        Self {
            elicitation: Some(ElicitationCapability::default()),
            ..Self::default()
        }
    }

    /// Whether the client declared the extension `id`.
    pub fn declares_extension(&self, id: &str) -> bool {
        self.extensions
            .as_ref()
            .is_some_and(|extensions| extensions.contains_key(id))
    }

    /// Whether the client declared the tasks extension.
    pub fn declares_tasks(&self) -> bool {
        self.declares_extension(crate::TASKS_EXTENSION)
    }

    /// Whether the client renders MCP Apps views: it declared the UI extension,
    /// and its `mimeTypes`, when it lists them, include [`crate::UI_MIME_TYPE`].
    /// (The extension makes `mimeTypes` required, but a host that declares the
    /// extension without them can only mean the one type that exists.)
    pub fn declares_ui(&self) -> bool {
        let Some(settings) = self
            .extensions
            .as_ref()
            .and_then(|extensions| extensions.get(crate::UI_EXTENSION))
        else {
            return false;
        };
        match settings.get("mimeTypes") {
            None => true,
            Some(Value::Array(types)) => types
                .iter()
                .any(|media_type| media_type.as_str() == Some(crate::UI_MIME_TYPE)),
            Some(_) => false,
        }
    }

    /// Whether the client accepts form-mode elicitation (`elicitation: {}` means form).
    pub fn supports_form_elicitation(&self) -> bool {
        self.elicitation
            .as_ref()
            .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
    }

    /// Whether the client accepts URL-mode elicitation.
    pub fn supports_url_elicitation(&self) -> bool {
        self.elicitation
            .as_ref()
            .is_some_and(|elicitation| elicitation.url.is_some())
    }

    /// Whether the client declared sampling.
    pub fn supports_sampling(&self) -> bool {
        self.sampling.is_some()
    }

    /// Whether the client declared roots.
    pub fn supports_roots(&self) -> bool {
        self.roots.is_some()
    }
}

/// A progress token: a string or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProgressToken {
    /// An integer token.
    Number(i64),
    /// A string token.
    String(String),
}

/// The per-request `_meta` fields a server reads.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestMeta {
    /// The protocol version the request is written in.
    pub protocol_version: String,
    /// What the client can do for this request.
    pub client_capabilities: ClientCapabilities,
    /// Who the client is, when it said.
    pub client_info: Option<Implementation>,
    /// The token to report progress against, when the client wants progress.
    pub progress_token: Option<ProgressToken>,
    /// The minimum log level the client wants, when it opted into log messages.
    pub log_level: Option<String>,
}

/// Why a request's `_meta` is unusable (every case is -32602, HTTP 400).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaError(pub String);

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl RequestMeta {
    /// Reads `_meta` from a request's params.
    ///
    /// # Errors
    /// [`MetaError`] when params or `_meta` are missing, or a required field is missing
    /// or of the wrong type.
    pub fn from_params(params: Option<&Value>) -> Result<Self, MetaError> {
        let Some(params) = params else {
            return Err(MetaError(
                "params with _meta are required on every request".into(),
            ));
        };
        let Some(meta) = params.get("_meta") else {
            return Err(MetaError(
                "params._meta is required on every request".into(),
            ));
        };
        let Value::Object(meta) = meta else {
            return Err(MetaError("params._meta must be an object".into()));
        };
        let protocol_version = match meta.get(PROTOCOL_VERSION_KEY) {
            Some(Value::String(version)) => version.clone(),
            Some(_) => {
                return Err(MetaError(format!(
                    "_meta[\"{PROTOCOL_VERSION_KEY}\"] must be a string"
                )));
            }
            None => {
                return Err(MetaError(format!(
                    "_meta[\"{PROTOCOL_VERSION_KEY}\"] is required"
                )));
            }
        };
        let client_capabilities = match meta.get(CLIENT_CAPABILITIES_KEY) {
            Some(value @ Value::Object(_)) => {
                ClientCapabilities::deserialize(value).map_err(|err| {
                    MetaError(format!(
                        "_meta[\"{CLIENT_CAPABILITIES_KEY}\"] is malformed: {err}"
                    ))
                })?
            }
            Some(_) => {
                return Err(MetaError(format!(
                    "_meta[\"{CLIENT_CAPABILITIES_KEY}\"] must be an object"
                )));
            }
            None => {
                return Err(MetaError(format!(
                    "_meta[\"{CLIENT_CAPABILITIES_KEY}\"] is required"
                )));
            }
        };
        let client_info = match meta.get(CLIENT_INFO_KEY) {
            None | Some(Value::Null) => None,
            Some(value) => Some(Implementation::deserialize(value).map_err(|err| {
                MetaError(format!("_meta[\"{CLIENT_INFO_KEY}\"] is malformed: {err}"))
            })?),
        };
        let progress_token = match meta.get(PROGRESS_TOKEN_KEY) {
            None | Some(Value::Null) => None,
            Some(value) => Some(ProgressToken::deserialize(value).map_err(|_| {
                MetaError("_meta.progressToken must be a string or an integer".into())
            })?),
        };
        let log_level = match meta.get(LOG_LEVEL_KEY) {
            None | Some(Value::Null) => None,
            Some(Value::String(level)) => Some(level.clone()),
            Some(_) => {
                return Err(MetaError(format!(
                    "_meta[\"{LOG_LEVEL_KEY}\"] must be a string"
                )));
            }
        };
        Ok(Self {
            protocol_version,
            client_capabilities,
            client_info,
            progress_token,
            log_level,
        })
    }
}
