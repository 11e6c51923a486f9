//! The earlier protocol era (revisions 2025-03-26, 2025-06-18 and 2025-11-25): a
//! client opens with `initialize`, and the server keeps what was negotiated in a
//! session named by the `Mcp-Session-Id` header. The types here are that era's
//! wire shapes; everything the two eras share (tools, results, errors) comes from
//! the rest of this crate.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JsonObject;
use crate::meta::Implementation;

/// The revisions of the earlier era Docket speaks, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];

/// The HTTP header that names a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The `initialize` method.
pub const INITIALIZE: &str = "initialize";

/// The code of "this session does not exist" (the transport answers it with 404,
/// which tells the client to initialize again).
pub const SESSION_NOT_FOUND: i64 = -32001;

/// The version the server answers an `initialize` for `requested` with: the same
/// when Docket speaks it, otherwise its newest of the era (the client then decides
/// whether it can speak that).
pub fn negotiate(requested: &str) -> &'static str {
    LEGACY_VERSIONS
        .iter()
        .find(|version| **version == requested)
        .copied()
        .unwrap_or(LEGACY_VERSIONS[0])
}

/// Every version Docket speaks, both eras, as one sentence for error messages:
/// clients often show only the message.
pub fn versions_sentence() -> String {
    format!(
        "this server speaks {} (with _meta on every request) and {} (after initialize)",
        crate::SUPPORTED_VERSIONS.join(", "),
        LEGACY_VERSIONS.join(", ")
    )
}

/// The params of `initialize`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The revision the client would like to speak.
    pub protocol_version: String,
    /// What the client can do.
    #[serde(default)]
    pub capabilities: JsonObject,
    /// Who the client is.
    #[serde(default)]
    pub client_info: Option<Value>,
}

/// What the server offers, in the earlier era's shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyServerCapabilities {
    /// Tools are offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<JsonObject>,
    /// `logging/setLevel` is served and log notifications are sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<JsonObject>,
    /// Task-augmented requests (2025-11-25): which requests, and `list`/`cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Value>,
    /// The other features offered (`resources`, `prompts`, `completions`), as sent.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The answer to `initialize`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The revision the session speaks.
    pub protocol_version: String,
    /// What the server offers.
    pub capabilities: LegacyServerCapabilities,
    /// Who the server is.
    pub server_info: Implementation,
    /// How to use the server, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_version_is_kept_and_any_other_gets_the_newest() {
        for version in LEGACY_VERSIONS {
            assert_eq!(negotiate(version), *version);
        }
        for requested in ["2024-11-05", "2026-07-28", "", "v999"] {
            assert_eq!(negotiate(requested), "2025-11-25");
        }
    }

    #[test]
    fn the_versions_sentence_names_every_version() {
        let sentence = versions_sentence();
        for version in crate::SUPPORTED_VERSIONS.iter().chain(LEGACY_VERSIONS) {
            assert!(sentence.contains(version), "{sentence}");
        }
    }

    mod generated {
        //! Property tests at the `initialize` params parser: no input panics it, and
        //! whatever it accepts negotiates to a revision Docket speaks.

        use proptest::prelude::*;
        use serde_json::Value;

        use super::super::*;

        fn json_value() -> impl Strategy<Value = Value> {
            crate::arbitrary::json_value(prop_oneof![
                Just("protocolVersion".to_owned()),
                Just("capabilities".to_owned()),
                Just("clientInfo".to_owned()),
                "[a-z]{0,8}".prop_map(String::from),
            ])
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 512,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            #[test]
            fn initialize_params_parse_or_refuse_and_negotiate_to_a_known_revision(
                params in json_value()
            ) {
                // (The envelope refuses params that are not an object before this runs.)
                if let Ok(parsed) = InitializeParams::deserialize(&params) {
                    prop_assert!(LEGACY_VERSIONS.contains(&negotiate(&parsed.protocol_version)));
                }
            }
        }
    }
}
