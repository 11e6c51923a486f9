#![doc = include_str!("../README.md")]

mod catalog;
mod document;
mod endpoint;
mod error;
mod index;
mod limits;
mod lines;
mod media;
mod operation;
mod plan;
mod pointer;
mod problem;
mod render;
mod resolve;
mod search;
mod size;
mod source;
mod tokens;
mod validate;

pub use catalog::{Catalog, CatalogVersion};
pub use error::{CatalogError, DuplicateOperationId};
pub use limits::{
    MAX_DOCUMENT_BYTES, MAX_HEADER_BYTES, MAX_NESTING_DEPTH, MAX_OPERATIONS,
    MAX_PROBLEMS_PER_ARGUMENT, MAX_QUERY_CHARS, MAX_QUERY_PAIRS, MAX_QUERY_WORDS,
    MAX_REQUEST_TARGET_BYTES, MAX_RESOLVED_DEPTH, MAX_RESOLVED_VALUES, MAX_SEARCH_LIMIT,
};
pub use operation::{Operation, Parameter, ParameterLocation, RequestBody, Response};
pub use plan::PlannedCall;
pub use problem::ArgumentProblem;
pub use search::{EndpointSummary, SearchPage};
