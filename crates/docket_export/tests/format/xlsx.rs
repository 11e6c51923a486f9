//! XLSX read back with calamine, a reader independent of the writer: every Trino type's
//! cell type, nulls, the header, a cut long cell, the sheet's row and column limits,
//! any rows round-tripping as text and number cells, and a Trino export whose package
//! is piped to the sink after its last page.

use std::io::Cursor;

use std::time::Duration;

use calamine::{Data, Reader as _, Xlsx, open_workbook_from_rs};
use docket_export::export::{ExportError, ExportLimits, ExportReport, export_query};
use docket_export::format::{
    ChunkBuffer, ColumnSpec, Format, FormatError, RowWriter, XLSX_MAX_CELL_CHARS, XLSX_MAX_COLUMNS,
    XLSX_MAX_SHEET_ROWS, XLSX_TRUNCATION_MARKER,
};
use docket_export::sink::{FilesystemSink, ObjectSink as _};
use docket_export::trino::{TrinoClient, TrinoConfig};
use docket_trino_double::TrinoDouble;
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::columns;

/// Writes `pages` as XLSX and returns the file.
fn write_xlsx(columns: &[ColumnSpec], pages: &[Vec<Vec<Value>>]) -> Vec<u8> {
    let mut writer = RowWriter::new(Format::Xlsx, Vec::new()).expect("xlsx is built in");
    writer.begin(columns).expect("begin");
    for page in pages {
        writer.write_rows(page).expect("write_rows");
        // Nothing reaches the output before finish: the package is assembled there.
        assert_eq!(writer.bytes_written(), 0);
    }
    let (report, output) = writer.finish().expect("finish");
    assert_eq!(report.bytes, output.len() as u64);
    assert_eq!(
        report.rows,
        pages.iter().map(|page| page.len() as u64).sum::<u64>()
    );
    output
}

/// The sheet's cells, row by row, from the top-left corner (A1) whatever is empty.
fn read_sheet(bytes: Vec<u8>) -> Vec<Vec<Data>> {
    let mut workbook: Xlsx<_> = open_workbook_from_rs(Cursor::new(bytes)).expect("an xlsx file");
    assert_eq!(workbook.sheet_names(), vec!["export".to_owned()]);
    let range = workbook.worksheet_range("export").expect("the sheet");
    let (height, width) = range.end().map_or((0, 0), |(row, column)| {
        (row as usize + 1, column as usize + 1)
    });
    (0..height)
        .map(|row| {
            (0..width)
                .map(|column| {
                    range
                        .get_value((row as u32, column as u32))
                        .cloned()
                        .unwrap_or(Data::Empty)
                })
                .collect()
        })
        .collect()
}

fn text(value: &str) -> Data {
    Data::String(value.to_owned())
}

/// A date cell's serial number, or a panic naming what the cell was instead.
fn date_serial(cell: &Data) -> f64 {
    match cell {
        Data::DateTime(datetime) => datetime.as_f64(),
        other => panic!("not a date cell: {other:?}"),
    }
}

#[test]
fn every_trino_type_gets_its_cell_type_and_nulls_are_empty() {
    let columns = columns(&[
        ("tiny", "tinyint"),
        ("big", "bigint"),
        ("ratio", "double"),
        ("price", "decimal(12,2)"),
        ("wide", "decimal(38,10)"),
        ("ok", "boolean"),
        ("day", "date"),
        ("at", "timestamp(3)"),
        ("name", "varchar"),
        ("doc", "json"),
        ("tags", "array(varchar)"),
        ("attrs", "map(varchar, integer)"),
        ("pair", "row(a integer, b varchar)"),
        ("zoned", "timestamp(3) with time zone"),
        ("bytes", "varbinary"),
    ]);
    let row = vec![
        json!(-7),
        json!(9_007_199_254_740_993_i64),
        json!(0.25),
        json!("12.50"),
        json!("1234567890.0123456789"),
        json!(true),
        json!("2024-01-31"),
        json!("2024-01-31 12:34:56.789"),
        json!("=SUM(A1:A2)"),
        json!("{\"k\":[1,2]}"),
        json!(["a", "b"]),
        json!({"k": 1}),
        json!([1, "x"]),
        json!("2024-01-31 12:34:56.789 UTC"),
        json!("AAEC"),
    ];
    let special = vec![
        json!(127),
        json!(9_007_199_254_740_992_i64),
        json!("NaN"),
        json!("-3.00"),
        json!("0.5000000000"),
        json!(false),
        json!("1800-01-01"),
        json!("2024-01-31 00:00:00.000"),
        json!(""),
        json!("null"),
        json!([]),
        json!({}),
        json!([null, null]),
        Value::Null,
        Value::Null,
    ];
    let nulls = vec![Value::Null; columns.len()];
    let sheet = read_sheet(write_xlsx(&columns, &[vec![row, nulls], vec![special]]));
    assert_eq!(sheet.len(), 4, "the header and three rows");

    let header: Vec<Data> = columns.iter().map(|column| text(&column.name)).collect();
    assert_eq!(sheet[0], header);

    let first = &sheet[1];
    assert_eq!(first[0], Data::Float(-7.0));
    // Beyond 2^53 a double cannot hold the integer: it is kept exactly, as text.
    assert_eq!(first[1], text("9007199254740993"));
    assert_eq!(first[2], Data::Float(0.25));
    assert_eq!(first[3], Data::Float(12.5));
    // 20 significant digits: text, not a rounded number.
    assert_eq!(first[4], text("1234567890.0123456789"));
    assert_eq!(first[5], Data::Bool(true));
    // 2024-01-31 is day 45 322 of the spreadsheet calendar.
    assert_eq!(date_serial(&first[6]), 45_322.0);
    let at = date_serial(&first[7]);
    let expected = 45_322.0 + (12.0 * 3600.0 + 34.0 * 60.0 + 56.789) / 86_400.0;
    assert!((at - expected).abs() < 1e-9, "{at} != {expected}");
    // Text stays text: a formula is never run.
    assert_eq!(first[8], text("=SUM(A1:A2)"));
    assert_eq!(first[9], text("{\"k\":[1,2]}"));
    assert_eq!(first[10], text("[\"a\",\"b\"]"));
    assert_eq!(first[11], text("{\"k\":1}"));
    assert_eq!(first[12], text("[1,\"x\"]"));
    assert_eq!(first[13], text("2024-01-31 12:34:56.789 UTC"));
    assert_eq!(first[14], text("AAEC"));

    assert!(
        sheet[2].iter().all(|cell| *cell == Data::Empty),
        "nulls are empty cells: {:?}",
        sheet[2]
    );

    let last = &sheet[3];
    assert_eq!(last[0], Data::Float(127.0));
    assert_eq!(last[1], Data::Float(9_007_199_254_740_992.0));
    // A spreadsheet has no NaN: the text Trino sent.
    assert_eq!(last[2], text("NaN"));
    assert_eq!(last[3], Data::Float(-3.0));
    assert_eq!(last[4], Data::Float(0.5));
    assert_eq!(last[5], Data::Bool(false));
    // Before 1900 a spreadsheet has no date: the text Trino sent.
    assert_eq!(last[6], text("1800-01-01"));
    assert_eq!(date_serial(&last[7]), 45_322.0);
    // An empty text is an empty cell to a reader, as to a spreadsheet.
    assert_eq!(last[8], Data::Empty);
    assert_eq!(last[9], text("null"));
    assert_eq!(last[10], text("[]"));
    assert_eq!(last[11], text("{}"));
    assert_eq!(last[12], text("[null,null]"));
    assert_eq!(last[13], Data::Empty);
}

#[test]
fn a_text_longer_than_a_cell_is_cut_with_the_marker() {
    let columns = columns(&[
        ("long", "varchar"),
        ("wide", "varchar"),
        ("fits", "varchar"),
    ]);
    let long = "x".repeat(XLSX_MAX_CELL_CHARS + 10);
    // Characters outside the BMP count twice, as spreadsheets count them.
    let wide = "😀".repeat(XLSX_MAX_CELL_CHARS);
    let fits = "y".repeat(XLSX_MAX_CELL_CHARS);
    let page = vec![vec![json!(long), json!(wide), json!(fits)]];
    let sheet = read_sheet(write_xlsx(&columns, &[page]));
    let utf16 = |data: &Data| match data {
        Data::String(text) => (text.clone(), text.encode_utf16().count()),
        other => panic!("not text: {other:?}"),
    };
    let (cut, length) = utf16(&sheet[1][0]);
    assert_eq!(length, XLSX_MAX_CELL_CHARS);
    assert!(cut.ends_with(XLSX_TRUNCATION_MARKER));
    assert!(
        cut.trim_end_matches(XLSX_TRUNCATION_MARKER)
            .bytes()
            .all(|byte| byte == b'x')
    );
    let (cut, length) = utf16(&sheet[1][1]);
    assert!(length <= XLSX_MAX_CELL_CHARS, "{length}");
    assert!(cut.ends_with(XLSX_TRUNCATION_MARKER));
    assert!(
        cut.trim_end_matches(XLSX_TRUNCATION_MARKER)
            .chars()
            .all(|c| c == '😀')
    );
    assert_eq!(sheet[1][2], text(&fits), "a text at the limit is whole");
}

#[test]
fn the_sheet_takes_its_last_row_and_refuses_the_page_past_it() {
    let columns = columns(&[("n", "bigint")]);
    let mut writer = RowWriter::new(Format::Xlsx, Vec::new()).expect("xlsx");
    writer.begin(&columns).expect("begin");
    // All the rows a sheet holds below its header; only the last has a value, so the
    // test writes one cell and still reaches the last row.
    let data_rows = XLSX_MAX_SHEET_ROWS - 1;
    let mut page = vec![vec![Value::Null]; usize::try_from(data_rows).expect("fits")];
    if let Some(last) = page.last_mut() {
        *last = vec![json!(42)];
    }
    // One row too many is refused as a whole page, before anything is written.
    page.push(vec![json!(43)]);
    let error = writer.write_rows(&page).expect_err("past the sheet");
    assert!(
        matches!(error, FormatError::FormatLimit { format: Format::Xlsx, limit, .. } if limit == data_rows),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "an xlsx sheet holds at most 1048575 rows below its header row; narrow the query, \
         add a LIMIT, or export as csv, jsonl or parquet"
    );
    assert_eq!(writer.rows_written(), 0);
    page.pop();
    writer.write_rows(&page).expect("exactly the sheet's rows");
    assert_eq!(writer.rows_written(), data_rows);
    let error = writer.write_rows(&[vec![json!(1)]]).expect_err("full");
    assert!(
        matches!(error, FormatError::FormatLimit { .. }),
        "{error:?}"
    );
    let (_, output) = writer.finish().expect("finish");

    let mut workbook: Xlsx<_> = open_workbook_from_rs(Cursor::new(output)).expect("xlsx");
    let range = workbook.worksheet_range("export").expect("the sheet");
    assert_eq!(
        range.end(),
        Some((u32::try_from(data_rows).expect("fits"), 0))
    );
    assert_eq!(
        range.get_value((u32::try_from(data_rows).expect("fits"), 0)),
        Some(&Data::Float(42.0))
    );
}

#[test]
fn more_columns_than_a_sheet_holds_are_refused_at_begin() {
    let wide: Vec<ColumnSpec> = (0..=XLSX_MAX_COLUMNS)
        .map(|index| ColumnSpec::new(format!("c{index}"), "integer"))
        .collect();
    let mut writer = RowWriter::new(Format::Xlsx, Vec::new()).expect("xlsx");
    let error = writer.begin(&wide).expect_err("too wide");
    assert_eq!(
        error.to_string(),
        "an xlsx sheet holds at most 16384 columns; narrow the query, add a LIMIT, or export as \
         csv, jsonl or parquet"
    );
    let mut writer = RowWriter::new(Format::Xlsx, Vec::new()).expect("xlsx");
    writer
        .begin(&wide[..XLSX_MAX_COLUMNS])
        .expect("exactly the sheet's columns");
}

#[test]
fn an_output_that_fails_at_finish_is_an_io_error() {
    #[derive(Debug)]
    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut writer = RowWriter::new(Format::Xlsx, Broken).expect("xlsx");
    writer.begin(&columns(&[("a", "bigint")])).expect("begin");
    writer
        .write_rows(&[vec![json!(1)]])
        .expect("rows go to the sheet's file");
    let error = writer.finish().expect_err("the output fails");
    // The zip writer wraps the output's error; the cause is kept in the chain.
    let mut causes = Vec::new();
    let mut cause: Option<&dyn std::error::Error> = Some(&error);
    while let Some(current) = cause {
        causes.push(current.to_string());
        cause = current.source();
    }
    assert_eq!(causes[0], "could not write the xlsx workbook");
    assert!(
        causes.iter().any(|cause| cause.contains("disk full")),
        "{causes:?}"
    );
}

#[test]
fn duplicate_and_unnamed_columns_get_the_names_of_the_keyed_formats() {
    let columns = columns(&[("a", "integer"), ("a", "integer"), ("", "integer")]);
    let sheet = read_sheet(write_xlsx(
        &columns,
        &[vec![vec![json!(1), json!(2), json!(3)]]],
    ));
    assert_eq!(sheet[0], vec![text("a"), text("a_2"), text("_col2")]);
}

#[test]
fn the_sheet_stays_on_disk_until_finish_and_counts_its_uncompressed_size() {
    let buffer = ChunkBuffer::new();
    let mut writer = RowWriter::new(Format::Xlsx, buffer.clone()).expect("xlsx");
    writer.begin(&super::synthetic_columns()).expect("begin");
    let mut last = writer.buffered_bytes();
    for page in 0..20 {
        writer
            .write_rows(&super::synthetic_page(page * 1_000, 1_000))
            .expect("page");
        assert!(buffer.is_empty(), "nothing is output before finish");
        assert!(
            writer.buffered_bytes() > last,
            "the byte cap sees the sheet grow"
        );
        last = writer.buffered_bytes();
    }
    let (report, _) = writer.finish().expect("finish");
    let file = buffer.take();
    assert_eq!(report.bytes, file.len() as u64);
    assert!(
        report.bytes < last,
        "the package ({}) is compressed below the sheet's size ({last})",
        report.bytes
    );
    assert_eq!(read_sheet(file.to_vec()).len(), 20_001);
}

/// An export to the filesystem sink of `sql` on the Trino double, as XLSX.
async fn export_xlsx(
    sql: &str,
    max_bytes: u64,
) -> (
    Result<ExportReport, ExportError>,
    Vec<u8>,
    crate::sink::TempDir,
) {
    let double = TrinoDouble::start().await.expect("the double starts");
    let client =
        TrinoClient::new(TrinoConfig::new(double.url(), "alice")).expect("a valid configuration");
    let root = crate::sink::TempDir::new("xlsx-export");
    let sink = FilesystemSink::new(root.path());
    let upload = sink.begin("a/out.xlsx").await.expect("begin");
    let limits = ExportLimits {
        max_rows: 1_000_000,
        max_bytes,
        timeout: Duration::from_secs(120),
    };
    let outcome = export_query(
        &client,
        sql,
        Format::Xlsx,
        upload,
        limits,
        &CancellationToken::new(),
        &|_, _| {},
    )
    .await;
    let file = std::fs::read(root.path().join("a/out.xlsx")).unwrap_or_default();
    (outcome, file, root)
}

#[tokio::test]
async fn a_trino_export_streams_the_package_to_the_sink_after_the_last_page() {
    let (outcome, file, _root) =
        export_xlsx("SELECT * FROM synthetic.big.rows_100k", 1 << 30).await;
    let report = outcome.expect("the export finishes");
    assert_eq!(report.rows, 100_000);
    assert_eq!(report.bytes, file.len() as u64);
    // Larger than one chunk of the pipe, so it went through in several.
    assert!(file.len() > 1024 * 1024, "{} bytes", file.len());
    let sheet = read_sheet(file);
    assert_eq!(sheet.len(), 100_001);
    assert_eq!(
        sheet[0],
        vec![text("id"), text("name"), text("category"), text("amount")]
    );
    assert_eq!(
        sheet[100_000],
        vec![
            Data::Float(100_000.0),
            text("row-100000"),
            text("category-5"),
            Data::Float(0.0)
        ]
    );
}

#[tokio::test]
async fn a_trino_export_past_the_byte_cap_stores_nothing() {
    let (outcome, file, root) = export_xlsx("SELECT * FROM synthetic.big.rows_100k", 100_000).await;
    let error = outcome.expect_err("too large");
    assert!(
        matches!(error, ExportError::TooLarge { limit: 100_000 }),
        "{error:?}"
    );
    assert!(file.is_empty());
    assert!(crate::sink::files_under(root.path()).is_empty());
}

/// The columns of the round trip, and for each a value and the cell it must read back as.
const ROUND_TRIP_TYPES: [&str; 4] = ["bigint", "double", "varchar", "varchar"];

fn any_cell(trino_type: &'static str) -> BoxedStrategy<(Value, Data)> {
    let exact = 1_i64 << 53;
    let value = match trino_type {
        "bigint" => (-exact..=exact)
            .prop_map(|n| (json!(n), Data::Float(n as f64)))
            .boxed(),
        "double" => any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| (json!(x), Data::Float(x)))
            .boxed(),
        // Any text, control characters and the writer's own escapes included.
        _ => "(\\PC|[\\x00-\\x1f]|_x[0-9A-F]{4}_){1,40}"
            .prop_map(|s| (json!(s.clone()), Data::String(s)))
            .boxed(),
    };
    prop_oneof![9 => value, 1 => Just((Value::Null, Data::Empty))].boxed()
}

fn any_row() -> impl Strategy<Value = Vec<(Value, Data)>> {
    ROUND_TRIP_TYPES.map(any_cell).to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any rows read back as the text and number cells they were written as.
    #[test]
    fn any_rows_round_trip_as_text_and_number_cells(
        rows in prop::collection::vec(any_row(), 1..20),
    ) {
        let columns: Vec<ColumnSpec> = ROUND_TRIP_TYPES
            .iter()
            .enumerate()
            .map(|(index, trino_type)| ColumnSpec::new(format!("c{index}"), *trino_type))
            .collect();
        let page: Vec<Vec<Value>> = rows
            .iter()
            .map(|row| row.iter().map(|(value, _)| value.clone()).collect())
            .collect();
        let sheet = read_sheet(write_xlsx(&columns, &[page]));
        for (index, row) in rows.iter().enumerate() {
            let read = sheet.get(index + 1).cloned().unwrap_or_default();
            for (column, (_, expected)) in row.iter().enumerate() {
                let got = read.get(column).cloned().unwrap_or(Data::Empty);
                prop_assert_eq!(&got, expected, "row {}, column {}", index, column);
            }
        }
    }
}
