//! JSON Lines pages: one JSON object per line; blank lines are not rows.

use super::error::ViewError;
use super::objects::ObjectRows;
use super::page::RowPage;
use super::records::{Framed, Framer};
use super::scan::{RowScan, TextAsset};

/// The format name checkpoints are kept under.
const FORMAT: &str = "jsonl";

/// Cuts text into lines.
#[derive(Debug, Default)]
pub(super) struct LineFramer {
    /// How far into the line in progress has been looked at.
    scanned: usize,
}

impl Framer for LineFramer {
    fn frame(&mut self, input: &[u8], at_end: bool) -> Result<Framed, ViewError> {
        let newline = input[self.scanned..]
            .iter()
            .position(|&byte| byte == b'\n')
            .map(|index| self.scanned + index);
        let (length, consumed) = match newline {
            Some(newline) => (newline, newline + 1),
            None if at_end && input.is_empty() => return Ok(Framed::End),
            None if at_end => (input.len(), input.len()),
            None => {
                self.scanned = input.len();
                return Ok(Framed::NeedMore);
            }
        };
        self.scanned = 0;
        if input[..length].iter().all(u8::is_ascii_whitespace) {
            return Ok(Framed::Skip(consumed));
        }
        Ok(Framed::Record { length, consumed })
    }
}

/// The page of `rows` rows from `first_row` of a JSON Lines asset.
///
/// # Errors
///
/// [`ViewError::Malformed`] for a line that is not one JSON object; errors from
/// reading.
pub(super) async fn page(
    asset: TextAsset<'_>,
    first_row: u64,
    rows: usize,
) -> Result<RowPage, ViewError> {
    let mut scan = RowScan::open(asset, FORMAT, first_row, |_| LineFramer::default()).await?;
    if !scan.skip_to(first_row).await? {
        scan.finish();
        return Ok(RowPage::empty(Vec::new(), first_row));
    }
    let mut page_rows = ObjectRows::default();
    while page_rows.len() < rows {
        let Some((row, bytes)) = scan.next_row().await? else {
            break;
        };
        page_rows.push(row, bytes)?;
    }
    let more = page_rows.len() == rows && scan.has_more().await?;
    scan.finish();
    Ok(page_rows.into_page(first_row, more))
}
