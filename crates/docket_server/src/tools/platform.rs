//! `platform_info` (who am I, which persona, which tools and connections, whether
//! tasks are on) and `list_connections`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use docket_protocol::tools::CallToolResult;
use serde_json::{Value, json};

use super::output::read_only;
use super::output::{array, boolean, record, string, string_or_null};
use crate::config::ConnectionConfig;
use crate::registry::{RegistryError, ToolCall, ToolOutcome, ToolRegistry, ToolSpec};

/// The name of the platform information tool.
pub(crate) const PLATFORM_INFO: &str = "platform_info";
/// The name of the connection listing tool.
pub(crate) const LIST_CONNECTIONS: &str = "list_connections";

/// A connection's client certificate (mutual TLS), and when it expires.
pub(crate) struct Certificate {
    pub(crate) connection: String,
    pub(crate) expires: time::OffsetDateTime,
}

pub(super) fn register(
    registry: &mut ToolRegistry,
    connections: Arc<BTreeMap<String, ConnectionConfig>>,
    tool_names: Arc<OnceLock<Vec<String>>>,
    tasks_enabled: bool,
    certificates: Arc<Vec<Certificate>>,
) -> Result<(), RegistryError> {
    // The tool list is filled by the app once every tool (the script tools and an
    // embedder's included) is registered; it and the connections are fixed for the
    // life of the process.
    let no_arguments = json!({"type": "object", "properties": {}, "additionalProperties": false});
    registry.register(
        ToolSpec::new(
            PLATFORM_INFO,
            "Describes this Docket server and the caller: identity, persona, the tools and \
             connections the caller may use, and whether long calls run as tasks.",
            no_arguments.clone(),
        )
        .with_annotations(read_only())
        .with_output_schema(platform_info_schema())
        // A caller can always find out who it is, rate limited or not.
        .without_rate_limit(),
        move |call: ToolCall| {
            let tool_names = Arc::clone(&tool_names);
            let certificates = Arc::clone(&certificates);
            async move {
                let names = tool_names.get().map_or(&[][..], Vec::as_slice);
                ToolOutcome::Result(platform_info(&call, names, tasks_enabled, &certificates))
            }
        },
    )?;
    registry.register(
        ToolSpec::new(
            LIST_CONNECTIONS,
            "Lists the data connections (Trino, HTTP APIs, GraphQL) the caller may use, with their kind and description.",
            json!({
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["trino", "api", "graphql"], "description": "Only connections of this kind."}
                },
                "additionalProperties": false
            }),
        )
        .with_annotations(read_only())
        .with_output_schema(record(json!({
            "connections": array(record(json!({
                "name": string("Pass it as `connection`."),
                "kind": {"type": "string", "enum": ["trino", "api", "graphql"]},
                "description": string_or_null("What the connection reaches."),
            })), "The connections the caller may use."),
        }))),
        move |call: ToolCall| {
            let connections = Arc::clone(&connections);
            async move {
                let kind = call.arguments.get("kind").and_then(Value::as_str);
                let visible = visible_connections(connections.iter(), |name| call.persona.may_use_connection(name), kind);
                ToolOutcome::Result(CallToolResult::structured(json!({ "connections": visible })))
            }
        },
    )?;
    Ok(())
}

/// What `platform_info` answers; `client_certificates` only to administrators.
fn platform_info_schema() -> Value {
    let mut schema = record(json!({
        "server": record(json!({
            "name": string("The server's name."),
            "version": string("Docket's version."),
            "protocol_version": string("The current protocol revision."),
        })),
        "identity": record(json!({
            "subject": string("Who the caller is, as Docket knows it."),
            "name": string_or_null("A display name."),
            "email": string_or_null("An e-mail address."),
            "roles": array(string("A role."), "The caller's roles."),
            "auth_type": string("How the caller authenticated."),
        })),
        "persona": string("The persona that decides what the caller may do."),
        "is_admin": boolean("Whether the persona is the administrators'."),
        "tools": array(string("A tool name."), "The tools the caller may call."),
        "tasks": record(json!({
            "enabled": boolean("Whether long calls may become tasks."),
            "extension": string("The extension to declare to get tasks."),
            "note": string("What that means for the caller."),
        })),
    }));
    schema["properties"]["client_certificates"] = array(
        record(json!({
            "connection": string("The api or graphql connection."),
            "expires_at": string("When its client certificate expires (RFC 3339)."),
            "days_left": {"type": "integer", "description": "Whole days until then (negative once passed)."},
        })),
        "Administrators only: the client certificates connections present (mutual TLS).",
    );
    schema
}

fn platform_info(
    call: &ToolCall,
    tool_names: &[String],
    tasks_enabled: bool,
    certificates: &[Certificate],
) -> CallToolResult {
    let identity = &call.identity;
    let persona = &call.persona;
    let tools: Vec<&String> = tool_names
        .iter()
        .filter(|name| persona.may_call_tool(name))
        .collect();
    let mut answer = json!({
        "server": {
            "name": crate::state::SERVER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "protocol_version": docket_protocol::PROTOCOL_VERSION,
        },
        "identity": {
            "subject": identity.subject,
            "name": identity.display_name,
            "email": identity.email,
            "roles": identity.roles,
            "auth_type": identity.kind.as_str(),
        },
        "persona": persona.name,
        "is_admin": persona.is_admin,
        "tools": tools,
        "tasks": {
            "enabled": tasks_enabled,
            "extension": docket_protocol::TASKS_EXTENSION,
            "note": if tasks_enabled {
                "declare the extension on a request to get a task back from long tools"
            } else {
                "long tools answer directly: no database is configured or tasks.enabled is false"
            },
        },
    });
    if persona.is_admin {
        let now = time::OffsetDateTime::now_utc();
        answer["client_certificates"] = certificates
            .iter()
            .map(|certificate| {
                json!({
                    "connection": certificate.connection,
                    "expires_at": certificate
                        .expires
                        .format(&time::format_description::well_known::Rfc3339)
                        .unwrap_or_default(),
                    "days_left": (certificate.expires - now).whole_days(),
                })
            })
            .collect();
    }
    CallToolResult::structured(answer)
}

/// The connections a caller may see, as `list_connections` reports them.
fn visible_connections<'a>(
    connections: impl Iterator<Item = (&'a String, &'a ConnectionConfig)>,
    may_use: impl Fn(&str) -> bool,
    kind: Option<&str>,
) -> Vec<Value> {
    connections
        .filter(|(name, connection)| may_use(name) && kind.is_none_or(|kind| connection.kind.as_str() == kind))
        .map(|(name, connection)| {
            json!({ "name": name, "kind": connection.kind.as_str(), "description": connection.description })
        })
        .collect()
}
