//! The MCP Apps extension (`io.modelcontextprotocol/ui`, stable 2026-01-26): the
//! `_meta.ui` a tool carries to name its view, the `_meta.ui` of a view's
//! contents (its CSP and border preference), and the settings each side puts in
//! `capabilities.extensions`. Which client declared the extension is
//! [`crate::meta::ClientCapabilities::declares_ui`].

use serde::{Deserialize, Serialize};

use crate::JsonObject;

/// The `_meta` key under which the extension's fields travel.
pub const META_KEY: &str = "ui";

/// A tool's `_meta.ui`: the view that shows its results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUi {
    /// The `ui://` resource the host reads and frames.
    pub resource_uri: String,
}

/// The origins a view may reach, each a CSP directive the host builds; empty
/// means none (the host's strict default).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Csp {
    /// Origins for fetch, XHR and WebSocket (`connect-src`).
    pub connect_domains: Vec<String>,
    /// Origins for scripts, styles, images, fonts and media.
    pub resource_domains: Vec<String>,
    /// Origins for nested frames (`frame-src`).
    pub frame_domains: Vec<String>,
    /// Allowed base URIs (`base-uri`).
    pub base_uri_domains: Vec<String>,
}

/// A view's contents' `_meta.ui`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceUi {
    /// The origins the view may reach.
    pub csp: Csp,
    /// Whether the host should draw a border and background around the view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefers_border: Option<bool>,
}

/// What a side declares in `capabilities.extensions["io.modelcontextprotocol/ui"]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UiSettings {
    /// The view media types it handles ([`crate::UI_MIME_TYPE`]).
    pub mime_types: Vec<String>,
}

impl UiSettings {
    /// The settings of a side whose views are HTML, the one kind there is.
    pub fn html() -> Self {
        Self {
            mime_types: vec![crate::UI_MIME_TYPE.to_owned()],
        }
    }
}

/// A `_meta` object holding `ui` alone.
pub fn meta(ui: &impl Serialize) -> JsonObject {
    let mut meta = JsonObject::new();
    // These types hold only strings, lists and booleans: they always serialize.
    if let Ok(value) = serde_json::to_value(ui) {
        meta.insert(META_KEY.to_owned(), value);
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::ClientCapabilities;

    fn declaring(settings: serde_json::Value) -> ClientCapabilities {
        let mut extensions = JsonObject::new();
        extensions.insert(crate::UI_EXTENSION.to_owned(), settings);
        ClientCapabilities {
            extensions: Some(extensions),
            ..ClientCapabilities::default()
        }
    }

    #[test]
    fn a_client_renders_views_when_it_declares_the_extension_for_html() {
        use serde_json::json;
        assert!(declaring(json!({"mimeTypes": [crate::UI_MIME_TYPE]})).declares_ui());
        assert!(
            declaring(json!({"mimeTypes": ["text/uri-list", crate::UI_MIME_TYPE]})).declares_ui()
        );
        // The one kind of view there is, when a host names none.
        assert!(declaring(json!({})).declares_ui());
        assert!(!declaring(json!({"mimeTypes": ["text/uri-list"]})).declares_ui());
        assert!(!declaring(json!({"mimeTypes": crate::UI_MIME_TYPE})).declares_ui());
        assert!(!declaring(json!({"mimeTypes": []})).declares_ui());
        assert!(!ClientCapabilities::default().declares_ui());
        assert!(!ClientCapabilities::with_extension(crate::TASKS_EXTENSION).declares_ui());
    }

    #[test]
    fn the_shapes_are_the_extensions() {
        let tool = meta(&ToolUi {
            resource_uri: "ui://docket/results".to_owned(),
        });
        assert_eq!(
            serde_json::Value::Object(tool),
            serde_json::json!({"ui": {"resourceUri": "ui://docket/results"}})
        );
        let resource = meta(&ResourceUi {
            csp: Csp::default(),
            prefers_border: Some(true),
        });
        assert_eq!(
            serde_json::Value::Object(resource),
            serde_json::json!({"ui": {"csp": {"connectDomains": [], "resourceDomains": [],
                "frameDomains": [], "baseUriDomains": []}, "prefersBorder": true}})
        );
        assert_eq!(
            serde_json::to_value(UiSettings::html()).ok(),
            Some(serde_json::json!({"mimeTypes": ["text/html;profile=mcp-app"]}))
        );
    }
}
