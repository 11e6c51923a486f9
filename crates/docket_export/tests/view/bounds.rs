//! The viewer's bounds on untrusted assets: rows per page, columns, cell length,
//! record size; and malformed assets, which are errors and never panics.

use docket_export::format::{ColumnSpec, Format, WriterOptions};
use docket_export::sink::FilesystemSink;
use docket_export::view::{
    CELL_TRUNCATION_MARKER, MAX_CELL_CHARS, MAX_COLUMNS, MAX_PAGE_ROWS, MAX_RECORD_BYTES,
    ViewError, Viewer,
};
use serde_json::{Value, json};

use super::{page, viewable_formats, write_asset, write_bytes};
use crate::sink::TempDir;

#[tokio::test]
async fn rows_per_page_and_columns_are_capped() {
    let root = TempDir::new("view-caps");
    let sink = FilesystemSink::new(root.path());
    let columns: Vec<ColumnSpec> = (0..300)
        .map(|index| ColumnSpec::new(format!("c{index}"), "integer"))
        .collect();
    let rows: Vec<Vec<Value>> = (0..1_200)
        .map(|row| (0..300).map(|column| json!(row * 1000 + column)).collect())
        .collect();
    for format in viewable_formats() {
        let key = format!("wide/content.{format}");
        write_asset(
            &sink,
            &key,
            format,
            &columns,
            &rows,
            WriterOptions::default(),
        )
        .await;
        let shown = page(&Viewer::new(), &sink, &key, format, 100, 10_000).await;
        assert_eq!(shown.rows.len(), MAX_PAGE_ROWS, "{format}");
        assert!(shown.more, "{format}");
        assert_eq!(shown.columns.len(), MAX_COLUMNS, "{format}");
        assert_eq!(shown.columns[255], "c255", "{format}");
        assert!(
            shown.rows.iter().all(|row| row.len() == MAX_COLUMNS),
            "{format}"
        );
        assert_eq!(shown.rows[0][255], "100255", "{format}");
    }
}

#[tokio::test]
async fn a_huge_cell_is_cut_at_a_character_boundary() {
    let root = TempDir::new("view-huge-cell");
    let sink = FilesystemSink::new(root.path());
    let columns = vec![ColumnSpec::new("text", "varchar")];
    let huge = "é😀".repeat(MAX_CELL_CHARS);
    let rows = vec![vec![json!(huge)], vec![json!("small")]];
    let mut expected: String = huge.chars().take(MAX_CELL_CHARS).collect();
    expected.push(CELL_TRUNCATION_MARKER);
    for format in viewable_formats() {
        let key = format!("huge/content.{format}");
        write_asset(
            &sink,
            &key,
            format,
            &columns,
            &rows,
            WriterOptions::default(),
        )
        .await;
        let shown = page(&Viewer::new(), &sink, &key, format, 0, 10).await;
        assert_eq!(shown.rows[0][0], expected, "{format}");
        assert_eq!(shown.rows[1][0], "small", "{format}");
    }
}

#[tokio::test]
async fn a_record_over_the_limit_is_an_error_not_an_allocation() {
    let root = TempDir::new("view-huge-record");
    let sink = FilesystemSink::new(root.path());
    let long = "x".repeat(MAX_RECORD_BYTES + 1);
    let cases = [
        (
            "long.jsonl",
            "jsonl",
            format!("{{\"a\":1}}\n{{\"a\":\"{long}\"}}\n"),
        ),
        (
            "long.json",
            "json",
            format!("[{{\"a\":1}},\n{{\"a\":\"{long}\"}}]"),
        ),
        ("long.csv", "csv", format!("a\n1\n{long}\n")),
        // A quote that never closes makes the rest of the file one record.
        (
            "open-quote.csv",
            "csv",
            format!("a\n1\n\"{}\n", "y\n".repeat(MAX_RECORD_BYTES / 2 + 1)),
        ),
    ];
    for (key, format, content) in cases {
        write_bytes(&sink, key, content.as_bytes()).await;
        let viewer = Viewer::new();
        let first = viewer
            .page(&sink, key, format, 0, 1)
            .await
            .expect("the short row");
        assert_eq!(first.rows.len(), 1, "{key}");
        match viewer.page(&sink, key, format, 1, 1).await {
            Err(ViewError::TooLarge { limit_bytes, .. }) => {
                assert_eq!(limit_bytes, MAX_RECORD_BYTES as u64);
            }
            other => panic!("{key}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn malformed_assets_are_errors_not_panics() {
    let root = TempDir::new("view-malformed");
    let sink = FilesystemSink::new(root.path());
    let cases: [(&str, &str, &[u8], u64, &str); 9] = [
        ("utf8.csv", "csv", b"a,b\n1,\xff\xfe\n", 0, "row 0"),
        (
            "ragged.csv",
            "csv",
            b"a,b\n1,2\n3\n",
            1,
            "row 1 has 1 fields",
        ),
        ("header.csv", "csv", b"\xff\n1\n", 0, "the header"),
        ("array.jsonl", "jsonl", b"{\"a\":1}\n[1,2]\n", 1, "row 1"),
        ("utf8.jsonl", "jsonl", b"{\"a\":\"\xc3\"}\n", 0, "row 0"),
        ("object.json", "json", b"{\"a\":1}", 0, "not an array"),
        (
            "open.json",
            "json",
            b"[{\"a\":1},\n{\"a\":2}",
            5,
            "not closed",
        ),
        ("scalar.json", "json", b"[1]", 0, "row 0"),
        (
            "garbage.parquet",
            "parquet",
            b"not a parquet file at all",
            0,
            "",
        ),
    ];
    for (key, format, content, first_row, says) in cases {
        if format == "parquet" && !cfg!(feature = "parquet") {
            continue;
        }
        write_bytes(&sink, key, content).await;
        let error = Viewer::new()
            .page(&sink, key, format, first_row, 10)
            .await
            .expect_err(key);
        match (&error, format) {
            (ViewError::Malformed { reason }, _) => {
                assert!(reason.contains(says), "{key}: {reason}");
            }
            #[cfg(feature = "parquet")]
            (ViewError::Parquet(_), "parquet") => {}
            _ => panic!("{key}: {error:?}"),
        }
    }
}

#[tokio::test]
async fn a_csv_of_only_a_header_has_columns_and_no_rows() {
    let root = TempDir::new("view-header-only");
    let sink = FilesystemSink::new(root.path());
    write_bytes(&sink, "h.csv", b"x,y\n").await;
    let shown = page(&Viewer::new(), &sink, "h.csv", Format::Csv, 0, 10).await;
    assert_eq!(shown.columns, ["x", "y"]);
    assert!(shown.rows.is_empty() && !shown.more);
    write_bytes(&sink, "nothing.csv", b"").await;
    let nothing = page(&Viewer::new(), &sink, "nothing.csv", Format::Csv, 0, 10).await;
    assert!(nothing.columns.is_empty() && nothing.rows.is_empty() && !nothing.more);
}
