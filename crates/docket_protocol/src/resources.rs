//! Resources: `resources/list`, `resources/templates/list` and `resources/read`.
//! A resource's contents reuse [`crate::tools::ResourceContents`],
//! the shape an embedded resource has in a tool result.

use serde::{Deserialize, Serialize};

use crate::result::{CacheScope, ResultType};
use crate::tools::ResourceContents;

/// A resource a client may read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// A family of resources named by an RFC 6570 URI template.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// The URI template, for example `docket://assets/{id}`.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What its resources are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The media type of its resources, when they share one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// The params of `resources/list` and `resources/templates/list`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ListParams {
    /// The cursor of the page after the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The result of `resources/list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourcesResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// One page of resources.
    pub resources: Vec<Resource>,
    /// The cursor of the next page, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// How long the page may be cached, in milliseconds.
    pub ttl_ms: u64,
    /// Who may reuse it.
    pub cache_scope: CacheScope,
}

/// The result of `resources/templates/list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourceTemplatesResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// The templates.
    pub resource_templates: Vec<ResourceTemplate>,
    /// The cursor of the next page, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// How long the list may be cached, in milliseconds.
    pub ttl_ms: u64,
    /// Who may reuse it.
    pub cache_scope: CacheScope,
}

/// The params of `resources/read`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceParams {
    /// The resource's URI.
    pub uri: String,
}

/// The result of `resources/read`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResourceResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// The resource's contents (never empty).
    pub contents: Vec<ResourceContents>,
    /// How long the contents may be cached, in milliseconds.
    pub ttl_ms: u64,
    /// Who may reuse them.
    pub cache_scope: CacheScope,
}
