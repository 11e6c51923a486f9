//! Rows kept as Trino's text write the same bytes as the same rows decoded, in every
//! format that reads the text directly and in those that decode it first.

use docket_export::cells::TextRows;
use docket_export::format::{ColumnSpec, Format, FormatError, RowWriter};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::columns;

/// The columns every generated row fills: each of Trino's JSON kinds, and a text column
/// that gets any JSON value (Parquet writes a non-string there as its JSON text).
fn typed_columns() -> Vec<ColumnSpec> {
    columns(&[
        ("id", "bigint"),
        ("amount", "double"),
        ("name", "varchar"),
        ("flag", "boolean"),
        ("anything", "varchar"),
    ])
}

fn nullable(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![1 => Just(Value::Null), 4 => value]
}

/// Any JSON value a cell can hold, nested a little.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Eighths print and parse back exactly, whichever float parser reads them.
        (-1_000_000_i64..1_000_000).prop_map(|n| json!(n as f64 / 8.0)),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z\"\\\\]{0,4}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn row() -> impl Strategy<Value = Vec<Value>> {
    (
        nullable(any::<i64>().prop_map(Value::from)),
        nullable((-1_000_000_i64..1_000_000).prop_map(|n| json!(n as f64 / 8.0))),
        nullable(any::<String>().prop_map(Value::from)),
        nullable(any::<bool>().prop_map(Value::from)),
        any_json(),
    )
        .prop_map(|(id, amount, name, flag, anything)| vec![id, amount, name, flag, anything])
}

/// The output of `pages` written as decoded values, or as text when `as_text`.
fn written(format: Format, pages: &[Vec<Vec<Value>>], as_text: bool) -> (Vec<u8>, u64) {
    let mut writer = RowWriter::new(format, Vec::new()).expect("format available");
    writer.begin(&typed_columns()).expect("begin");
    for page in pages {
        if as_text {
            let text = serde_json::to_string(page).expect("rows serialize");
            let rows = TextRows::parse(&text).expect("rows parse");
            assert_eq!(rows.len(), page.len());
            writer.write_text_rows(&rows).expect("write_text_rows");
        } else {
            writer.write_rows(page).expect("write_rows");
        }
    }
    let (report, output) = writer.finish().expect("finish");
    (output, report.rows)
}

fn text_formats() -> Vec<Format> {
    let mut formats = vec![Format::Csv, Format::Json, Format::Jsonl];
    if cfg!(feature = "parquet") {
        formats.push(Format::Parquet);
    }
    formats
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn rows_as_text_write_what_the_decoded_rows_write(
        pages in prop::collection::vec(prop::collection::vec(row(), 0..12), 0..4),
    ) {
        for format in text_formats() {
            let decoded = written(format, &pages, false);
            let text = written(format, &pages, true);
            prop_assert_eq!(&text.1, &decoded.1, "{:?}: rows", format);
            prop_assert!(text.0 == decoded.0, "{:?}: the outputs differ", format);
        }
    }
}

#[test]
fn a_row_of_the_wrong_width_or_a_bad_value_is_the_same_error_from_text() {
    let mut writer = RowWriter::new(Format::Csv, Vec::new()).expect("csv");
    writer.begin(&typed_columns()).expect("begin");
    let rows = TextRows::parse(r#"[[1, 2.5, "a", true, null], [1, 2]]"#).expect("rows");
    match writer.write_text_rows(&rows) {
        Err(FormatError::RowWidth {
            row: 1,
            values: 2,
            columns: 5,
        }) => {}
        other => panic!("expected a row-width error, got {other:?}"),
    }
    if cfg!(feature = "parquet") {
        let mut writer = RowWriter::new(Format::Parquet, Vec::new()).expect("parquet");
        writer.begin(&typed_columns()).expect("begin");
        let rows = TextRows::parse(r#"[[1, 2.5, "a", true, null], [1.5, 2, "b", false, 3]]"#)
            .expect("rows");
        match writer.write_text_rows(&rows) {
            Err(FormatError::Value {
                row: 1,
                column,
                reason,
            }) => {
                assert_eq!(column, "id");
                assert!(reason.contains("an integer"), "{reason}");
            }
            other => panic!("expected a value error, got {other:?}"),
        }
    }
}
