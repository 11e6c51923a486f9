//! An operation as the catalog indexes it: what a search shows, what a call is
//! checked against, with the path item's parameters merged in and references to
//! `components` (parameters, request bodies, responses) already followed. Schemas
//! are kept as the document writes them, `$ref`s and all.

use std::fmt;

use serde_json::Value;

/// One operation of the document: a method on a path.
#[derive(Clone, Debug, PartialEq)]
pub struct Operation {
    /// The document's `operationId`, or one made from the method and path
    /// (`get_items_by_id`) when it has none; unique within the catalog.
    pub operation_id: String,
    /// Whether `operation_id` was made up because the document gave none.
    pub operation_id_synthesized: bool,
    /// The HTTP method, upper-case (`GET`).
    pub method: String,
    /// The path template, as the document writes it (`/items/{id}`).
    pub path: String,
    /// The one-line summary.
    pub summary: Option<String>,
    /// The longer description.
    pub description: Option<String>,
    /// The tags that group it.
    pub tags: Vec<String>,
    /// Whether the document marks it deprecated.
    pub deprecated: bool,
    /// Its parameters: the path item's, overridden by the operation's own of the
    /// same name and location, then any path template variable the document left
    /// undeclared (as a required string).
    pub parameters: Vec<Parameter>,
    /// Its request body, when it takes one.
    pub request_body: Option<RequestBody>,
    /// Its responses, by status (`200`, `4XX`, `default`), in the order of their status.
    pub responses: Vec<Response>,
}

impl Operation {
    /// `GET /items/{id}`, for messages.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// Where a parameter goes in a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ParameterLocation {
    /// A variable of the path template.
    Path,
    /// A query string pair.
    Query,
    /// A request header.
    Header,
    /// A cookie (listed, but never sent: Docket's calls carry no caller cookies).
    Cookie,
}

impl ParameterLocation {
    /// The document's word for it (`path`, `query`, `header`, `cookie`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Query => "query",
            Self::Header => "header",
            Self::Cookie => "cookie",
        }
    }
}

impl fmt::Display for ParameterLocation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// One parameter of an operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    /// Its name (`id`, `limit`, `X-Request-Id`).
    pub name: String,
    /// Where it goes.
    pub location: ParameterLocation,
    /// Whether a call must give it (always, for path parameters).
    pub required: bool,
    /// What it means.
    pub description: Option<String>,
    /// Whether the document marks it deprecated.
    pub deprecated: bool,
    /// Its schema as written (`None`: any value).
    pub schema: Option<Value>,
    /// How a list or object value is written: `simple` (path and header), `form`
    /// (query), or the document's `style`.
    pub style: String,
    /// Whether list items and object members become separate pairs (`form`'s default).
    pub explode: bool,
    /// The media type of a parameter described by `content` instead of `schema`
    /// (its value is sent serialized in that type, as JSON for JSON types).
    pub content_type: Option<String>,
}

/// An operation's request body.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestBody {
    /// The media type a call sends: `application/json` when the document offers it,
    /// then any other JSON type, then the first by name.
    pub content_type: String,
    /// Whether a call must send a body.
    pub required: bool,
    /// What it holds.
    pub description: Option<String>,
    /// The schema of that media type, as written (`None`: any value).
    pub schema: Option<Value>,
}

/// One response of an operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The status (`200`, `4XX`, `default`).
    pub status: String,
    /// What it means.
    pub description: Option<String>,
    /// The media type its schema is taken from, chosen as for a request body.
    pub content_type: Option<String>,
    /// The schema of that media type, as written.
    pub schema: Option<Value>,
}
