//! The catalog: one parsed, checked and indexed OpenAPI document, and the
//! questions an agent asks of it (search, one endpoint's schema, a call's plan).

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::document::read;
use crate::endpoint::describe;
use crate::error::CatalogError;
use crate::index::index;
use crate::operation::Operation;
use crate::plan::{PlannedCall, plan};
use crate::problem::ArgumentProblem;
use crate::search::{OperationWords, SearchPage, search};

/// Which document a catalog was built from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CatalogVersion {
    /// The first 16 hex digits of the SHA-256 of the document's bytes: changes
    /// whenever the document does.
    pub digest: String,
    /// The document's `openapi` field (`3.1.0`).
    pub openapi: String,
    /// `info.title`.
    pub title: Option<String>,
    /// `info.version`.
    pub version: Option<String>,
}

/// An OpenAPI 3.0 or 3.1 document, checked and indexed by operation.
#[derive(Clone)]
pub struct Catalog {
    name: String,
    version: CatalogVersion,
    openapi_30: bool,
    document: Value,
    operations: Vec<Operation>,
    words: Vec<OperationWords>,
    by_id: HashMap<String, usize>,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Catalog")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("operations", &self.operations.len())
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// Reads, checks and indexes a document: JSON when its first character other
    /// than white space is `{`, YAML otherwise. `name` names it in errors.
    ///
    /// # Errors
    /// When the document is larger than [`MAX_DOCUMENT_BYTES`](crate::MAX_DOCUMENT_BYTES),
    /// not well-formed (the error gives the parser's line and column), nested deeper
    /// than [`MAX_NESTING_DEPTH`](crate::MAX_NESTING_DEPTH), not OpenAPI 3.0 or 3.1,
    /// shaped unlike OpenAPI (the error names the location and its line), holds more
    /// than [`MAX_OPERATIONS`](crate::MAX_OPERATIONS) operations, or gives two
    /// operations one `operationId` (the error names both).
    pub fn parse(name: &str, bytes: &[u8]) -> Result<Self, CatalogError> {
        let (document, source) = read(name, bytes)?;
        let indexed = index(name, &document, source)?;
        let digest = Sha256::digest(bytes);
        let mut digest = hex::encode(digest);
        digest.truncate(16);
        let openapi_30 = indexed.openapi.starts_with("3.0.");
        let words = indexed.operations.iter().map(OperationWords::of).collect();
        let by_id = indexed
            .operations
            .iter()
            .enumerate()
            .map(|(position, operation)| (operation.operation_id.clone(), position))
            .collect();
        Ok(Self {
            name: name.to_owned(),
            version: CatalogVersion {
                digest,
                openapi: indexed.openapi,
                title: indexed.title,
                version: indexed.version,
            },
            openapi_30,
            document,
            operations: indexed.operations,
            words,
            by_id,
        })
    }

    /// The name the catalog was parsed under.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which document it was built from.
    #[must_use]
    pub fn version(&self) -> &CatalogVersion {
        &self.version
    }

    /// Every operation, by path, then by method in the order OpenAPI lists them
    /// (`get`, `put`, `post`, `delete`, `options`, `head`, `patch`, `trace`).
    #[must_use]
    pub fn operations(&self) -> &[Operation] {
        &self.operations
    }

    /// The operation with this id.
    #[must_use]
    pub fn operation(&self, operation_id: &str) -> Option<&Operation> {
        self.by_id
            .get(operation_id)
            .and_then(|position| self.operations.get(*position))
    }

    /// Searches the operations `allowed` lets through for the words of `query`
    /// (at most [`MAX_QUERY_CHARS`](crate::MAX_QUERY_CHARS) characters of it are
    /// read), best first, and returns the page of at most `limit` results (capped at
    /// [`MAX_SEARCH_LIMIT`](crate::MAX_SEARCH_LIMIT)) from `offset`. `total` counts
    /// only allowed operations. An empty query lists them all by path and method.
    #[must_use]
    pub fn search(
        &self,
        query: &str,
        allowed: &dyn Fn(&Operation) -> bool,
        offset: usize,
        limit: usize,
    ) -> SearchPage {
        search(&self.operations, &self.words, query, allowed, offset, limit)
    }

    /// One operation described for an agent, in at most `max_bytes` bytes of
    /// compact JSON: `operation_id`, `method`, `path`, `summary`, `description`,
    /// `tags`, `deprecated`, `parameters` (`name`, `in`, `required`, `description`,
    /// `schema`), `request_body` (`content_type`, `required`, `schema`), `responses`
    /// (status to `description` and `schema`), `notes` on what resolution left out,
    /// and `truncated`. Local references are resolved, a cycle is marked
    /// `"x-docket-cycle": true`, and security and servers are left out. When the
    /// whole does not fit, response schemas go first, then schemas are cut at a
    /// depth, and `truncated` is `true`.
    ///
    /// # Errors
    /// [`CatalogError::UnknownOperation`] for an unknown id, and
    /// [`CatalogError::EndpointTooLarge`] when not even the operation without its
    /// schemas fits in `max_bytes`.
    pub fn endpoint_schema(
        &self,
        operation_id: &str,
        max_bytes: usize,
    ) -> Result<Value, CatalogError> {
        let operation =
            self.operation(operation_id)
                .ok_or_else(|| CatalogError::UnknownOperation {
                    operation_id: operation_id.to_owned(),
                })?;
        describe(&self.document, operation, max_bytes)
    }

    /// Checks a call of an operation and says what to send. `args` may hold the
    /// objects `path`, `query` and `headers` (parameter values by name) and `body`
    /// (any JSON); a `null` counts as not given.
    ///
    /// # Errors
    /// Every problem found, each naming its argument (`query.limit`): an unknown
    /// operation or argument name, a required parameter or body missing, a value or
    /// body its schema refuses, a body for an operation that takes none, a header a
    /// call may not set (`Authorization`, `Cookie`, `Host`, `Proxy-Authorization`,
    /// framing headers, names that are not tokens), or a value that would change the
    /// path's segments.
    pub fn plan_call(
        &self,
        operation_id: &str,
        args: &Map<String, Value>,
    ) -> Result<PlannedCall, Vec<ArgumentProblem>> {
        let Some(operation) = self.operation(operation_id) else {
            return Err(vec![ArgumentProblem::new(
                "operation_id",
                format!("`{operation_id}` is not an operation of this catalog"),
            )]);
        };
        plan(&self.document, self.openapi_30, operation, args)
    }
}
