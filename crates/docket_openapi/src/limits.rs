//! The bounds every catalog works within. A document, a query or a call that
//! would go past one is refused with an error that names the limit, or (for
//! output) degraded and marked, never allowed to grow without end.

/// The largest document [`Catalog::parse`](crate::Catalog::parse) reads, in bytes (8 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;

/// The deepest nesting of objects and arrays a document may have. The JSON and
/// YAML parsers stop on their own a little deeper (128), so neither can run out of
/// stack; both cases are reported as [`CatalogError::TooDeep`](crate::CatalogError::TooDeep).
pub const MAX_NESTING_DEPTH: usize = 100;

/// The most operations one document may hold.
pub const MAX_OPERATIONS: usize = 5_000;

/// The longest search query read, in characters; the rest of a longer query is ignored.
pub const MAX_QUERY_CHARS: usize = 512;

/// The most distinct words of a query that count towards a match.
pub const MAX_QUERY_WORDS: usize = 32;

/// The most results one search page holds, whatever limit is asked for.
pub const MAX_SEARCH_LIMIT: usize = 100;

/// The deepest a schema is expanded when its references are resolved; deeper
/// parts are replaced by `{"x-docket-truncated": true}`.
pub const MAX_RESOLVED_DEPTH: usize = 64;

/// The most JSON values one resolution produces before it stops expanding
/// references (a chain of references can otherwise grow exponentially).
pub const MAX_RESOLVED_VALUES: usize = 100_000;

/// The longest path and query string a planned call may have, in bytes, counted as
/// the values are rendered (before percent-encoding of the query).
pub const MAX_REQUEST_TARGET_BYTES: usize = 16 * 1024;

/// The most query pairs a planned call may have.
pub const MAX_QUERY_PAIRS: usize = 256;

/// The most bytes of header names and values a planned call may set.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// The most problems one schema check reports for one argument.
pub const MAX_PROBLEMS_PER_ARGUMENT: usize = 10;
