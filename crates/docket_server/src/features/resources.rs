//! Resources an embedder registers ([`crate::AppBuilder::resource`] and
//! [`crate::AppBuilder::resource_template`]): what each is, and the reader that
//! returns its contents.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use docket_protocol::resources::{Resource, ResourceTemplate};
use docket_protocol::tools::ResourceContents;

use crate::auth::Identity;

/// A resource with a fixed URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceSpec {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// What it is.
    pub description: Option<String>,
    /// Its media type.
    pub mime_type: Option<String>,
}

impl ResourceSpec {
    /// A resource `name` at `uri`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            description: None,
            mime_type: None,
        }
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With a media type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    pub(crate) fn to_wire(&self) -> Resource {
        Resource {
            uri: self.uri.clone(),
            name: self.name.clone(),
            title: None,
            description: self.description.clone(),
            mime_type: self.mime_type.clone(),
            size: None,
        }
    }
}

/// A family of resources named by a URI template (`{name}` variables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceTemplateSpec {
    /// The URI template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// What its resources are.
    pub description: Option<String>,
    /// Their media type, when they share one.
    pub mime_type: Option<String>,
}

impl ResourceTemplateSpec {
    /// Resources `name` at the URIs `uri_template` names.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri_template: uri_template.into(),
            name: name.into(),
            description: None,
            mime_type: None,
        }
    }

    /// With a description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// With a media type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    pub(crate) fn to_wire(&self) -> ResourceTemplate {
        ResourceTemplate {
            uri_template: self.uri_template.clone(),
            name: self.name.clone(),
            title: None,
            description: self.description.clone(),
            mime_type: self.mime_type.clone(),
        }
    }
}

/// One `resources/read` of a registered resource.
#[derive(Clone, Debug)]
pub struct ResourceRead {
    /// The URI asked for.
    pub uri: String,
    /// The template's variables as the URI gave them (empty for a fixed resource).
    pub variables: BTreeMap<String, String>,
    /// Who asks.
    pub identity: Arc<Identity>,
    /// Whether their persona makes them an administrator.
    pub is_admin: bool,
}

/// Lists resources that are not registered one by one (the caller's assets), a
/// page at a time after the registered ones.
pub(crate) trait ResourceLister: Send + Sync + 'static {
    /// One page of `subject`'s resources after `cursor`, and the next page's cursor.
    fn list<'a>(&'a self, subject: &'a str, cursor: Option<&'a str>) -> ListFuture<'a>;
}

/// One page of listed resources and the next page's cursor.
pub(crate) type ListFuture<'a> = Pin<
    Box<dyn Future<Output = Result<(Vec<Resource>, Option<String>), ResourceError>> + Send + 'a>,
>;

/// Why a read gave no contents.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// There is no such resource for this caller: the same answer as an unknown URI.
    #[error("resource not found")]
    NotFound,
    /// The resource exists but cannot be sent this way; the message says why and
    /// what to do instead.
    #[error("{0}")]
    Refused(String),
    /// A dependency failed; the message says what to do.
    #[error("{0}")]
    Unavailable(String),
}

/// What a reader returns.
pub type ResourceFuture =
    Pin<Box<dyn Future<Output = Result<Vec<ResourceContents>, ResourceError>> + Send>>;

/// Reads a registered resource. Closures `Fn(ResourceRead) -> impl Future` are readers.
pub trait ResourceReader: Send + Sync + 'static {
    /// The contents of the resource `read` names.
    fn read(&self, read: ResourceRead) -> ResourceFuture;
}

impl<F, Fut> ResourceReader for F
where
    F: Fn(ResourceRead) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<ResourceContents>, ResourceError>> + Send + 'static,
{
    fn read(&self, read: ResourceRead) -> ResourceFuture {
        Box::pin(self(read))
    }
}
