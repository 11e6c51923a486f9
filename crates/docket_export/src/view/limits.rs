//! The bounds of a page: asset bytes are untrusted, so every row, column, cell and
//! record a page shows or reads has a limit, and a cell over its limit is cut on a
//! character boundary rather than refused.

/// The most rows one page holds; a request for more gets this many.
pub const MAX_PAGE_ROWS: usize = 500;

/// The most columns a page shows; the columns after these are left out.
pub const MAX_COLUMNS: usize = 256;

/// The most characters of a cell (or column name) a page shows; a longer one is cut
/// there and ends with [`CELL_TRUNCATION_MARKER`].
pub const MAX_CELL_CHARS: usize = 2_000;

/// What follows the first [`MAX_CELL_CHARS`] characters of a cell that was cut.
pub const CELL_TRUNCATION_MARKER: char = '…';

/// The largest single record (a CSV record, a JSON Lines line, a JSON array's element)
/// read: a larger one is an error rather than an allocation.
pub const MAX_RECORD_BYTES: usize = 8 * 1024 * 1024;

/// The most bytes one Parquet page request reads (footer and column chunks together).
pub const MAX_PARQUET_READ_BYTES: u64 = 128 * 1024 * 1024;

/// `text` as a page shows it: whole, or its first [`MAX_CELL_CHARS`] characters
/// followed by [`CELL_TRUNCATION_MARKER`].
pub(super) fn shown_cell(text: &str) -> String {
    match text.char_indices().nth(MAX_CELL_CHARS) {
        Some((cut, _)) => {
            let mut shown = String::with_capacity(cut + CELL_TRUNCATION_MARKER.len_utf8());
            shown.push_str(&text[..cut]);
            shown.push(CELL_TRUNCATION_MARKER);
            shown
        }
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{CELL_TRUNCATION_MARKER, MAX_CELL_CHARS, shown_cell};

    #[test]
    fn cells_are_cut_on_character_boundaries() {
        assert_eq!(shown_cell("short"), "short");
        let exact = "é".repeat(MAX_CELL_CHARS);
        assert_eq!(shown_cell(&exact), exact);
        let long = "é".repeat(MAX_CELL_CHARS + 1);
        let shown = shown_cell(&long);
        assert_eq!(shown.chars().count(), MAX_CELL_CHARS + 1);
        assert!(shown.ends_with(CELL_TRUNCATION_MARKER));
        assert!(shown.starts_with(&exact));
    }
}
