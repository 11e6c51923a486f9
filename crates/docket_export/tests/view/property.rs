//! Random rows (commas, quotes, newlines, carriage returns, unicode, empty strings)
//! written by each writer and paged through with close checkpoints: the pages in
//! order are the rows, and a page at any position is the same slice of them, whether
//! or not a checkpoint is at or near it.

use docket_export::format::{ColumnSpec, Format, WriterOptions};
use docket_export::sink::FilesystemSink;
use docket_export::view::Viewer;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{page, viewable_formats, write_asset};
use crate::sink::TempDir;

/// The first characters after which the CSV writer puts a `'` (its formula guard).
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A cell as each format shows the string `text`.
fn shown(format: Format, text: &str) -> String {
    if format == Format::Csv && text.starts_with(FORMULA_STARTS) {
        format!("'{text}")
    } else {
        text.to_owned()
    }
}

fn any_cell() -> impl Strategy<Value = String> {
    "[a-z ,\"\n\r\t=+@é😀-]{0,8}"
}

fn check_format(
    runtime: &tokio::runtime::Runtime,
    format: Format,
    rows: &[Vec<String>],
    page_rows: usize,
    checkpoint_every: u64,
    probes: &[(u64, usize)],
) -> Result<(), TestCaseError> {
    let width = rows.first().map_or(1, Vec::len);
    let columns: Vec<ColumnSpec> = (0..width)
        .map(|index| ColumnSpec::new(format!("c{index}"), "varchar"))
        .collect();
    let values: Vec<Vec<Value>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| json!(cell)).collect())
        .collect();
    let expected: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| shown(format, cell)).collect())
        .collect();
    let total = expected.len() as u64;
    runtime.block_on(async {
        let root = TempDir::new("view-property");
        let sink = FilesystemSink::new(root.path());
        let key = format!("p/content.{format}");
        let options = WriterOptions {
            parquet_row_group_rows: 7,
            parquet_batch_rows: 3,
            ..WriterOptions::default()
        };
        write_asset(&sink, &key, format, &columns, &values, options).await;
        let viewer = Viewer::with_checkpoint_every(checkpoint_every);

        let mut read = Vec::new();
        let mut first_row = 0;
        loop {
            let next = page(&viewer, &sink, &key, format, first_row, page_rows).await;
            prop_assert_eq!(next.first_row, first_row);
            prop_assert!(next.rows.len() <= page_rows);
            read.extend(next.rows);
            first_row += page_rows as u64;
            prop_assert_eq!(next.more, first_row < total, "{} at {}", format, first_row);
            if !next.more {
                break;
            }
        }
        prop_assert_eq!(&read, &expected, "{} in pages of {}", format, page_rows);

        for &(first_row, rows) in probes {
            let at = page(&viewer, &sink, &key, format, first_row, rows).await;
            let start = usize::try_from(first_row.min(total)).unwrap_or(usize::MAX);
            let end = (start + rows).min(expected.len());
            prop_assert_eq!(
                &at.rows,
                &expected[start..end],
                "{} at {}",
                format,
                first_row
            );
            prop_assert_eq!(at.more, first_row + (rows as u64) < total);
            if !at.rows.is_empty() {
                let names: Vec<String> = (0..width).map(|index| format!("c{index}")).collect();
                prop_assert_eq!(&at.columns, &names);
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn pages_in_order_and_at_random_positions_are_the_written_rows(
        width in 1_usize..4,
        rows in prop::collection::vec(prop::collection::vec(any_cell(), 3), 0..60),
        page_rows in 1_usize..12,
        checkpoint_every in 1_u64..8,
        probes in prop::collection::vec((0_u64..70, 0_usize..15), 1..8),
    ) {
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|mut row| {
                row.truncate(width);
                row
            })
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        for format in viewable_formats() {
            check_format(&runtime, format, &rows, page_rows, checkpoint_every, &probes)?;
        }
    }
}
