//! Why a document cannot become a catalog, or why a catalog cannot answer. Every
//! message names the document and, where it can be found, the line.

/// Why [`Catalog::parse`](crate::Catalog::parse) refused a document, or why a
/// catalog could not answer a question about one of its operations.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// The document is larger than [`MAX_DOCUMENT_BYTES`](crate::MAX_DOCUMENT_BYTES).
    #[error(
        "the OpenAPI document `{name}` is {size} bytes, more than the {limit} bytes Docket reads"
    )]
    TooLarge {
        /// The document's name.
        name: String,
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The document is not UTF-8 text.
    #[error(
        "the OpenAPI document `{name}` is not UTF-8 text (the first bad byte is on line {line})"
    )]
    NotUtf8 {
        /// The document's name.
        name: String,
        /// The line of the first byte that is not UTF-8.
        line: usize,
    },
    /// The document is not well-formed JSON or YAML.
    #[error("the OpenAPI document `{name}` is not valid {format}{}: {message}", place(*.line, *.column))]
    Syntax {
        /// The document's name.
        name: String,
        /// `JSON` or `YAML`, as told by its first character (`{` is JSON).
        format: &'static str,
        /// The line of the error, from 1, when the parser knows it.
        line: Option<usize>,
        /// The column of the error, from 1, when the parser knows it.
        column: Option<usize>,
        /// The parser's description.
        message: String,
    },
    /// Objects and arrays are nested deeper than [`MAX_NESTING_DEPTH`](crate::MAX_NESTING_DEPTH).
    #[error("the OpenAPI document `{name}` nests objects and arrays deeper than {limit} levels{}", place(*.line, None))]
    TooDeep {
        /// The document's name.
        name: String,
        /// The deepest nesting read.
        limit: usize,
        /// Where the nesting went too deep, when known.
        line: Option<usize>,
    },
    /// The document is not OpenAPI 3.0 or 3.1 (Swagger 2.0 among them).
    #[error("the OpenAPI document `{name}`{}: {found}; Docket reads OpenAPI 3.0 and 3.1 documents", place(*.line, None))]
    UnsupportedVersion {
        /// The document's name.
        name: String,
        /// What the document says it is, in words.
        found: String,
        /// The line of its `openapi` (or `swagger`) field, when found.
        line: Option<usize>,
    },
    /// A part of the document does not have the shape OpenAPI gives it.
    #[error("the OpenAPI document `{name}`{}: {location} {message}", place(*.line, None))]
    Invalid {
        /// The document's name.
        name: String,
        /// Where, as a dotted path (`paths./items.get.parameters[0].in`).
        location: String,
        /// The line of that place (or of the nearest part around it), when found.
        line: Option<usize>,
        /// What is wrong, as the end of a sentence that starts with the location.
        message: String,
    },
    /// Two operations share an `operationId`.
    #[error(transparent)]
    DuplicateOperationId(Box<DuplicateOperationId>),
    /// The document has more than [`MAX_OPERATIONS`](crate::MAX_OPERATIONS) operations.
    #[error("the OpenAPI document `{name}` has more than {limit} operations")]
    TooManyOperations {
        /// The document's name.
        name: String,
        /// The limit.
        limit: usize,
    },
    /// No operation has this id.
    #[error("the catalog has no operation `{operation_id}`")]
    UnknownOperation {
        /// The id asked for.
        operation_id: String,
    },
    /// Even the barest description of the operation is larger than asked for.
    #[error(
        "the description of operation `{operation_id}` does not fit in {max_bytes} bytes, even without its schemas"
    )]
    EndpointTooLarge {
        /// The operation.
        operation_id: String,
        /// The size asked for.
        max_bytes: usize,
    },
}

/// Two operations of a document given one `operationId` (boxed in
/// [`CatalogError::DuplicateOperationId`], so that every result stays small).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the OpenAPI document `{name}` gives two operations the operationId `{operation_id}`: {first}{} and {second}{}",
    place(*.first_line, None),
    place(*.second_line, None)
)]
pub struct DuplicateOperationId {
    /// The document's name.
    pub name: String,
    /// The shared id.
    pub operation_id: String,
    /// The first operation, as `GET /items`.
    pub first: String,
    /// The line of the first operation's `operationId`, when found.
    pub first_line: Option<usize>,
    /// The second operation.
    pub second: String,
    /// The line of the second operation's `operationId`, when found.
    pub second_line: Option<usize>,
}

/// ` at line 3, column 7`, ` at line 3`, or nothing.
fn place(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
        (Some(line), None) => format!(" at line {line}"),
        (None, _) => String::new(),
    }
}
