//! The row viewer: pages of what each export writer wrote, read back through a sink;
//! (in `reads`) that pages far into a large asset start at a checkpoint; (in `bounds`)
//! the limits on rows, columns, cells and records, and malformed assets; (in
//! `property`) random rows paged through in order and at random positions.

mod bounds;
mod property;
mod reads;

use docket_export::format::{ChunkBuffer, ColumnSpec, Format, RowWriter, WriterOptions};
use docket_export::sink::{FilesystemSink, ObjectSink};
use docket_export::view::{RowPage, ViewError, Viewer};
use serde_json::{Value, json};

use crate::sink::TempDir;

/// The formats the viewer reads, as named in asset records.
pub(crate) fn viewable_formats() -> Vec<Format> {
    let mut formats = vec![Format::Csv, Format::Json, Format::Jsonl];
    if cfg!(feature = "parquet") {
        formats.push(Format::Parquet);
    }
    formats
}

/// Writes `rows` as `format` through the crate's own writer into `key`, page by page
/// as an export does.
pub(crate) async fn write_asset(
    sink: &dyn ObjectSink,
    key: &str,
    format: Format,
    columns: &[ColumnSpec],
    rows: &[Vec<Value>],
    options: WriterOptions,
) {
    let buffer = ChunkBuffer::new();
    let mut writer = RowWriter::with_options(format, buffer.clone(), options).expect("a writer");
    writer.begin(columns).expect("begin");
    let mut upload = sink.begin(key).await.expect("begin an upload");
    for page in rows.chunks(4096) {
        writer.write_rows(page).expect("write rows");
        upload.write(buffer.take()).await.expect("upload");
    }
    writer.finish().expect("finish");
    upload.write(buffer.take()).await.expect("upload");
    upload.commit().await.expect("commit");
}

/// Writes raw bytes into `key`.
pub(crate) async fn write_bytes(sink: &dyn ObjectSink, key: &str, bytes: &[u8]) {
    let mut upload = sink.begin(key).await.expect("begin an upload");
    upload
        .write(bytes::Bytes::copy_from_slice(bytes))
        .await
        .expect("upload");
    upload.commit().await.expect("commit");
}

/// A page the test expects to exist.
pub(crate) async fn page(
    viewer: &Viewer,
    sink: &dyn ObjectSink,
    key: &str,
    format: Format,
    first_row: u64,
    rows: usize,
) -> RowPage {
    viewer
        .page(sink, key, format.as_str(), first_row, rows)
        .await
        .unwrap_or_else(|error| panic!("{format} page at {first_row}: {error:?}"))
}

/// `id bigint, name varchar`, rows whose names need CSV quoting.
fn named_rows(count: u64) -> (Vec<ColumnSpec>, Vec<Vec<Value>>) {
    let columns = vec![
        ColumnSpec::new("id", "bigint"),
        ColumnSpec::new("name", "varchar"),
    ];
    let rows = (0..count)
        .map(|id| vec![json!(id), json!(name_of(id))])
        .collect();
    (columns, rows)
}

fn name_of(id: u64) -> String {
    format!("név {id}, \"quoted\"\nsecond line")
}

fn expected_named(range: std::ops::Range<u64>) -> Vec<Vec<String>> {
    range.map(|id| vec![id.to_string(), name_of(id)]).collect()
}

#[tokio::test]
async fn each_format_pages_through_what_its_writer_wrote() {
    let root = TempDir::new("view-formats");
    let sink = FilesystemSink::new(root.path());
    let (columns, rows) = named_rows(2_500);
    let options = WriterOptions {
        parquet_row_group_rows: 700,
        ..WriterOptions::default()
    };
    for format in viewable_formats() {
        let key = format!("alice/formats/content.{format}");
        write_asset(&sink, &key, format, &columns, &rows, options).await;
        let viewer = Viewer::new();

        let first = page(&viewer, &sink, &key, format, 0, 100).await;
        assert_eq!(first.columns, ["id", "name"], "{format}");
        assert_eq!(first.rows, expected_named(0..100), "{format}");
        assert_eq!((first.first_row, first.more), (0, true), "{format}");

        // Across the first checkpoint, before and after a pass has recorded it.
        for _ in 0..2 {
            let across = page(&viewer, &sink, &key, format, 990, 20).await;
            assert_eq!(across.rows, expected_named(990..1010), "{format}");
        }
        // Every page in order, then pages that start at and just after checkpoints.
        let mut first_row = 0;
        loop {
            let next = page(&viewer, &sink, &key, format, first_row, 500).await;
            assert_eq!(
                next.rows,
                expected_named(first_row..(first_row + 500).min(2_500)),
                "{format} at {first_row}"
            );
            first_row += 500;
            assert_eq!(next.more, first_row < 2_500, "{format} at {first_row}");
            if !next.more {
                break;
            }
        }
        for start in [1_000, 1_001, 1_999, 2_000] {
            let at = page(&viewer, &sink, &key, format, start, 3).await;
            assert_eq!(at.rows, expected_named(start..start + 3), "{format}");
            assert_eq!(at.first_row, start);
        }
        let last = page(&viewer, &sink, &key, format, 2_450, 100).await;
        assert_eq!(last.rows, expected_named(2_450..2_500), "{format}");
        assert!(!last.more, "{format}");
        let exact = page(&viewer, &sink, &key, format, 2_400, 100).await;
        assert!(!exact.more && exact.rows.len() == 100, "{format}");
        let almost = page(&viewer, &sink, &key, format, 2_399, 100).await;
        assert!(almost.more, "{format}");
    }
}

#[tokio::test]
async fn values_are_shown_as_text_in_each_format() {
    let root = TempDir::new("view-values");
    let sink = FilesystemSink::new(root.path());
    let columns = vec![
        ColumnSpec::new("n", "bigint"),
        ColumnSpec::new("missing", "varchar"),
        ColumnSpec::new("text", "varchar"),
        ColumnSpec::new("flag", "boolean"),
        ColumnSpec::new("price", "double"),
    ];
    let rows = vec![vec![
        json!(-7),
        Value::Null,
        json!("=1+1 ünïcode"),
        json!(true),
        json!(2.5),
    ]];
    for format in viewable_formats() {
        let key = format!("values/content.{format}");
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
        // Null is an empty cell where the file has no null (CSV) or none apart from
        // an empty cell (Parquet's null shows as one), and `null` in JSON.
        let (missing, text) = match format {
            Format::Csv => ("", "'=1+1 ünïcode"),
            Format::Parquet => ("", "=1+1 ünïcode"),
            _ => ("null", "=1+1 ünïcode"),
        };
        assert_eq!(
            shown.rows,
            [["-7", missing, text, "true", "2.5"]],
            "{format}"
        );
        assert_eq!(shown.columns, ["n", "missing", "text", "flag", "price"]);
    }
}

#[tokio::test]
async fn json_columns_are_the_keys_in_order_of_first_appearance() {
    let root = TempDir::new("view-json-keys");
    let sink = FilesystemSink::new(root.path());
    write_bytes(
        &sink,
        "k.jsonl",
        b"{\"b\":1}\n\n{\"a\":{\"x\":[1,2]},\"b\":\"s\"}\n{\"c\":null}",
    )
    .await;
    write_bytes(
        &sink,
        "k.json",
        b" [ {\"b\":1} ,{\"a\":{\"x\":[1,2]},\"b\":\"s\"},\n\n{\"c\":null}]  \n",
    )
    .await;
    for (key, format) in [("k.jsonl", Format::Jsonl), ("k.json", Format::Json)] {
        let viewer = Viewer::new();
        let all = page(&viewer, &sink, key, format, 0, 10).await;
        assert_eq!(all.columns, ["b", "a", "c"], "{format}");
        assert_eq!(
            all.rows,
            [["1", "", ""], ["s", r#"{"x":[1,2]}"#, ""], ["", "", "null"]],
            "{format}"
        );
        let later = page(&viewer, &sink, key, format, 2, 10).await;
        assert_eq!(later.columns, ["c"], "{format}: only the page's own keys");
        assert!(!later.more);
    }
}

#[tokio::test]
async fn a_first_row_past_the_end_gives_an_empty_page() {
    let root = TempDir::new("view-past-end");
    let sink = FilesystemSink::new(root.path());
    let (columns, rows) = named_rows(30);
    for format in viewable_formats() {
        let key = format!("past/content.{format}");
        write_asset(
            &sink,
            &key,
            format,
            &columns,
            &rows,
            WriterOptions::default(),
        )
        .await;
        let viewer = Viewer::with_checkpoint_every(4);
        for first_row in [30, 31, 1_000_000, u64::MAX] {
            let past = page(&viewer, &sink, &key, format, first_row, 10).await;
            assert!(
                past.rows.is_empty() && !past.more,
                "{format} at {first_row}"
            );
            assert_eq!(past.first_row, first_row);
        }
        let none = page(&viewer, &sink, &key, format, 29, 0).await;
        assert!(
            none.rows.is_empty() && none.more,
            "{format}: a row is there"
        );

        let empty_key = format!("past/empty.{format}");
        write_asset(
            &sink,
            &empty_key,
            format,
            &columns,
            &[],
            WriterOptions::default(),
        )
        .await;
        let empty = page(&viewer, &sink, &empty_key, format, 0, 10).await;
        assert!(empty.rows.is_empty() && !empty.more, "{format}");
    }
}

#[tokio::test]
async fn a_replaced_object_loses_its_checkpoints() {
    let root = TempDir::new("view-replaced");
    let sink = FilesystemSink::new(root.path());
    let viewer = Viewer::with_checkpoint_every(10);
    let (columns, rows) = named_rows(100);
    write_asset(
        &sink,
        "r.csv",
        Format::Csv,
        &columns,
        &rows,
        WriterOptions::default(),
    )
    .await;
    let before = page(&viewer, &sink, "r.csv", Format::Csv, 95, 10).await;
    assert_eq!(before.rows, expected_named(95..100));

    // Other rows under the same key: the checkpoints of the old object are not used.
    let shorter: Vec<Vec<Value>> = (0..100).map(|id| vec![json!(id), json!("x")]).collect();
    write_asset(
        &sink,
        "r.csv",
        Format::Csv,
        &columns,
        &shorter,
        WriterOptions::default(),
    )
    .await;
    let after = page(&viewer, &sink, "r.csv", Format::Csv, 95, 10).await;
    let expected: Vec<Vec<String>> = (95..100)
        .map(|id| vec![id.to_string(), "x".to_owned()])
        .collect();
    assert_eq!(after.rows, expected);
}

#[tokio::test]
async fn xlsx_and_unknown_formats_are_not_viewable() {
    let root = TempDir::new("view-not-viewable");
    let sink = FilesystemSink::new(root.path());
    write_bytes(&sink, "a.xlsx", b"PK").await;
    for format in ["xlsx", "text", "CSV", ""] {
        match Viewer::new().page(&sink, "a.xlsx", format, 0, 10).await {
            Err(ViewError::NotViewable { format: named }) => assert_eq!(named, format),
            other => panic!("{format:?}: {other:?}"),
        }
    }
    if !cfg!(feature = "parquet") {
        assert!(matches!(
            Viewer::new().page(&sink, "a.xlsx", "parquet", 0, 10).await,
            Err(ViewError::NotViewable { .. })
        ));
    }
}

#[tokio::test]
async fn a_missing_asset_is_the_sinks_not_found() {
    let root = TempDir::new("view-missing");
    let sink = FilesystemSink::new(root.path());
    for format in viewable_formats() {
        let error = Viewer::new()
            .page(&sink, "nobody/here.csv", format.as_str(), 0, 10)
            .await
            .expect_err("no object");
        assert!(
            matches!(
                error,
                ViewError::Sink(docket_export::sink::SinkError::NotFound { .. })
            ),
            "{format}: {error:?}"
        );
    }
}

#[test]
fn a_page_request_can_move_between_threads() {
    fn assert_send<T: Send>(_: &T) {}
    let sink = FilesystemSink::new("unused");
    let viewer = Viewer::new();
    let request = viewer.page(&sink, "k", "csv", 0, 1);
    assert_send(&request);
    drop(request);
}
