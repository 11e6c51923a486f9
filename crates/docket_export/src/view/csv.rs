//! CSV pages: RFC 4180 records (quoted fields may hold commas, quotes and newlines)
//! under a header row that names the columns.
//!
//! Records are cut where a `\n` falls outside quotes, which only needs the count of
//! `"` so far (a doubled `""` inside a quoted field flips twice); each record of the
//! page is then parsed by the `csv` crate. Blank lines are passed over without being
//! rows, as the `csv` crate's reader does.

use super::error::ViewError;
use super::limits::{MAX_COLUMNS, shown_cell};
use super::page::RowPage;
use super::records::{Framed, Framer, RecordReader};
use super::scan::{RowScan, TextAsset};

/// The format name checkpoints are kept under.
const FORMAT: &str = "csv";

/// Cuts CSV text into records.
#[derive(Debug, Default)]
pub(super) struct CsvFramer {
    /// How far into the record in progress has been looked at.
    scanned: usize,
    /// Whether `scanned` ends inside a quoted field.
    in_quotes: bool,
}

impl Framer for CsvFramer {
    fn frame(&mut self, input: &[u8], at_end: bool) -> Result<Framed, ViewError> {
        let newline =
            input[self.scanned..]
                .iter()
                .enumerate()
                .find_map(|(index, &byte)| match byte {
                    b'"' => {
                        self.in_quotes = !self.in_quotes;
                        None
                    }
                    b'\n' if !self.in_quotes => Some(self.scanned + index),
                    _ => None,
                });
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
        self.in_quotes = false;
        if matches!(&input[..length], b"" | b"\r") {
            return Ok(Framed::Skip(consumed));
        }
        Ok(Framed::Record { length, consumed })
    }
}

/// The page of `rows` rows from `first_row` of a CSV asset.
///
/// # Errors
///
/// [`ViewError::Malformed`] for a record that is not valid CSV or UTF-8, or whose
/// width differs from the header's; errors from reading.
pub(super) async fn page(
    asset: TextAsset<'_>,
    first_row: u64,
    rows: usize,
) -> Result<RowPage, ViewError> {
    let mut scan = RowScan::open(asset, FORMAT, first_row, |_| CsvFramer::default()).await?;
    let header = if scan.at_object_start() {
        match scan.next_header().await? {
            Some(bytes) => parse_record(bytes, "the header")?,
            None => return Ok(RowPage::empty(Vec::new(), first_row)),
        }
    } else {
        read_header(asset).await?
    };
    let columns: Vec<String> = header.iter().take(MAX_COLUMNS).map(shown_cell).collect();
    if !scan.skip_to(first_row).await? {
        scan.finish();
        return Ok(RowPage::empty(columns, first_row));
    }
    let mut page_rows = Vec::with_capacity(rows);
    while page_rows.len() < rows {
        let Some((row, bytes)) = scan.next_row().await? else {
            break;
        };
        let record = parse_record(bytes, &format!("row {row}"))?;
        if record.len() != header.len() {
            return Err(ViewError::malformed(format!(
                "row {row} has {} fields but the header has {}",
                record.len(),
                header.len()
            )));
        }
        page_rows.push(record.iter().take(MAX_COLUMNS).map(shown_cell).collect());
    }
    let more = page_rows.len() == rows && scan.has_more().await?;
    scan.finish();
    Ok(RowPage {
        columns,
        rows: page_rows,
        first_row,
        more,
    })
}

/// The header record, read from the object's start (for a scan that starts at a
/// checkpoint): only as many bytes as it takes.
async fn read_header(asset: TextAsset<'_>) -> Result<::csv::StringRecord, ViewError> {
    let content = asset.sink.open_at(asset.key, 0).await?;
    let mut records = RecordReader::new(content.into_stream(), 0, CsvFramer::default());
    match records.next().await? {
        Some(record) => parse_record(record.bytes, "the header"),
        None => Err(ViewError::malformed("the CSV asset has no header")),
    }
}

/// Parses one record's bytes (its terminator left off) with the `csv` crate.
fn parse_record(bytes: &[u8], what: &str) -> Result<::csv::StringRecord, ViewError> {
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(bytes.len().clamp(64, 8 * 1024))
        .from_reader(bytes);
    let mut record = ::csv::StringRecord::new();
    let invalid =
        |error: ::csv::Error| ViewError::malformed(format!("{what} is not valid CSV: {error}"));
    if !reader.read_record(&mut record).map_err(invalid)? {
        return Err(ViewError::malformed(format!("{what} is empty")));
    }
    // The framer cut one record; a second one here means a bare `\r` split it.
    let mut rest = ::csv::StringRecord::new();
    if reader.read_record(&mut rest).map_err(invalid)? {
        return Err(ViewError::malformed(format!(
            "{what} holds a carriage return outside quotes"
        )));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::{CsvFramer, Framed, Framer as _};

    /// Frames `input` in one go, as the records it holds.
    fn records(input: &[u8]) -> Vec<&[u8]> {
        let mut framer = CsvFramer::default();
        let mut position = 0;
        let mut found = Vec::new();
        loop {
            match framer.frame(&input[position..], true).expect("frames") {
                Framed::Skip(count) => position += count,
                Framed::Record { length, consumed } => {
                    found.push(&input[position..position + length]);
                    position += consumed;
                }
                Framed::End => return found,
                Framed::NeedMore => panic!("more wanted at the end"),
            }
        }
    }

    #[test]
    fn records_end_at_newlines_outside_quotes() {
        assert_eq!(
            records(b"a,b\n\"x\ny\",\"q\"\"\n\"\n\r\n\nlast"),
            [&b"a,b"[..], b"\"x\ny\",\"q\"\"\n\"", b"last"]
        );
    }

    #[test]
    fn a_record_split_across_chunks_is_found_once_whole() {
        let mut framer = CsvFramer::default();
        assert_eq!(
            framer.frame(b"\"a\nb", false).expect("frames"),
            Framed::NeedMore
        );
        assert_eq!(
            framer.frame(b"\"a\nb\",c\nnext", false).expect("frames"),
            Framed::Record {
                length: 7,
                consumed: 8
            }
        );
    }
}
