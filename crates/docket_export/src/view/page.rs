//! What a page request returns.

use serde::Serialize;

/// One page of an asset's rows, every cell as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowPage {
    /// The column names, at most [`MAX_COLUMNS`](super::MAX_COLUMNS): the CSV header,
    /// the Parquet schema's fields, or for JSON and JSON Lines the keys in the order
    /// they first appear within the page.
    pub columns: Vec<String>,
    /// The rows, each with one cell per column (`""` where a JSON row lacks the key).
    pub rows: Vec<Vec<String>>,
    /// The 0-based index, among the asset's data rows, of the first row here.
    pub first_row: u64,
    /// Whether the asset has rows after this page.
    pub more: bool,
}

impl RowPage {
    /// A page with no rows at `first_row`, at or past the end.
    pub(super) fn empty(columns: Vec<String>, first_row: u64) -> Self {
        Self {
            columns,
            rows: Vec::new(),
            first_row,
            more: false,
        }
    }
}
