//! Row writers: exact CSV, JSON and JSONL output (escaping, the formula guard), format
//! names and media types, misuse, bounded buffering on large streams, and Parquet and
//! XLSX read back with independent readers, and rows kept as text written as decoded rows are.

#[cfg(feature = "parquet")]
mod parquet;
mod text_rows;
mod xlsx;

use std::io::{self, Write};

use docket_export::format::{
    ChunkBuffer, ColumnSpec, Format, FormatError, FormatReport, RowWriter,
};
use serde_json::{Value, json};

/// Writes `pages` with a fresh writer and returns the whole output and the report.
fn write_all(
    format: Format,
    columns: &[ColumnSpec],
    pages: &[Vec<Vec<Value>>],
) -> (String, FormatReport) {
    let mut writer = RowWriter::new(format, Vec::new()).expect("format available");
    writer.begin(columns).expect("begin");
    for page in pages {
        writer.write_rows(page).expect("write_rows");
    }
    let (report, output) = writer.finish().expect("finish");
    assert_eq!(
        report.bytes,
        output.len() as u64,
        "the byte count matches the output"
    );
    (String::from_utf8(output).expect("utf-8"), report)
}

fn columns(specs: &[(&str, &str)]) -> Vec<ColumnSpec> {
    specs
        .iter()
        .map(|(name, trino_type)| ColumnSpec::new(*name, *trino_type))
        .collect()
}

#[test]
fn format_names_types_and_extensions() {
    let expected = [
        ("csv", Format::Csv, "text/csv", "csv"),
        ("json", Format::Json, "application/json", "json"),
        ("jsonl", Format::Jsonl, "application/x-ndjson", "jsonl"),
        (
            "parquet",
            Format::Parquet,
            "application/vnd.apache.parquet",
            "parquet",
        ),
        (
            "xlsx",
            Format::Xlsx,
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "xlsx",
        ),
    ];
    for (name, format, content_type, extension) in expected {
        assert_eq!(format.as_str(), name);
        assert_eq!(format.to_string(), name);
        assert_eq!(format.content_type(), content_type);
        assert_eq!(format.extension(), extension);
        if format.is_available() {
            assert_eq!(name.parse::<Format>().expect("parses"), format);
        } else {
            let error = name.parse::<Format>().expect_err("not built in");
            assert_eq!(
                error.to_string(),
                "the parquet format is not available in this build"
            );
        }
    }
    assert_eq!(Format::Parquet.is_available(), cfg!(feature = "parquet"));
    for wrong in ["CSV", "XLSX", "xls", "", "markdown", " csv"] {
        let error = wrong.parse::<Format>().expect_err("unknown");
        assert!(
            matches!(error, FormatError::UnknownFormat { .. }),
            "{wrong}"
        );
        assert!(
            error.to_string().starts_with("unsupported format"),
            "{error}"
        );
    }
}

#[test]
fn csv_has_a_header_quotes_where_needed_and_renders_every_json_kind() {
    let columns = columns(&[
        ("id", "bigint"),
        ("name", "varchar"),
        ("ok", "boolean"),
        ("price", "decimal(10,2)"),
        ("tags", "array(varchar)"),
        ("attrs", "map(varchar, integer)"),
        ("ratio", "double"),
    ]);
    let pages = vec![
        vec![
            vec![
                json!(1),
                json!("plain"),
                json!(true),
                json!("12.50"),
                json!(["a", "b"]),
                json!({"k": 1}),
                json!(0.5),
            ],
            vec![
                json!(2),
                json!("with, comma"),
                json!(false),
                json!("-3.00"),
                json!([]),
                json!({}),
                json!("NaN"),
            ],
        ],
        vec![
            vec![
                json!(3),
                json!("say \"hi\""),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                json!(-1.5e-7),
            ],
            vec![
                json!(-4),
                json!("two\nlines"),
                json!(true),
                json!("0.00"),
                json!([null]),
                json!({"a": "x,y"}),
                json!("-Infinity"),
            ],
            vec![
                json!(5),
                json!(""),
                json!(true),
                json!("1.00"),
                json!(["="]),
                json!({}),
                json!(1e300),
            ],
        ],
        vec![],
    ];
    let (output, report) = write_all(Format::Csv, &columns, &pages);
    assert_eq!(
        output,
        "id,name,ok,price,tags,attrs,ratio\n\
         1,plain,true,12.50,\"[\"\"a\"\",\"\"b\"\"]\",\"{\"\"k\"\":1}\",0.5\n\
         2,\"with, comma\",false,-3.00,[],{},NaN\n\
         3,\"say \"\"hi\"\"\",,,,,-1.5e-7\n\
         -4,\"two\nlines\",true,0.00,[null],\"{\"\"a\"\":\"\"x,y\"\"}\",-Infinity\n\
         5,,true,1.00,\"[\"\"=\"\"]\",{},1e+300\n"
    );
    assert_eq!(report.rows, 5);
}

#[test]
fn csv_guards_text_that_a_spreadsheet_would_run_as_a_formula() {
    let columns = columns(&[
        ("note", "varchar"),
        ("amount", "decimal(10,2)"),
        ("count", "bigint"),
    ]);
    let rows = vec![
        vec![
            json!("=HYPERLINK(\"http://x\")"),
            json!("-12.50"),
            json!(-7),
        ],
        vec![json!("+1"), json!("+3.00"), json!(0)],
        vec![json!("-2+3"), json!("-0.01"), json!(1)],
        vec![json!("@SUM(A1)"), json!("=1+1"), json!("-9")],
        vec![json!("\tcmd"), json!("1.00"), json!(2)],
        vec![json!("\rcmd"), json!("1.00"), json!(3)],
        vec![json!("a=1"), json!("1.00"), json!(4)],
        vec![json!("'already quoted"), json!("1.00"), json!(5)],
    ];
    let (output, _) = write_all(Format::Csv, &columns, &[rows]);
    assert_eq!(
        output,
        "note,amount,count\n\
         \"'=HYPERLINK(\"\"http://x\"\")\",-12.50,-7\n\
         '+1,+3.00,0\n\
         '-2+3,-0.01,1\n\
         '@SUM(A1),'=1+1,-9\n\
         '\tcmd,1.00,2\n\
         \"'\rcmd\",1.00,3\n\
         a=1,1.00,4\n\
         'already quoted,1.00,5\n",
        "text cells starting with = + - @ tab CR get a leading quote; numbers (JSON numbers \
         and numeric text in numeric columns) are left alone; a formula in a numeric column \
         is still guarded"
    );
}

#[test]
fn csv_header_names_are_guarded_and_quoted_too() {
    let columns = columns(&[("=danger", "varchar"), ("a,b", "varchar"), ("", "varchar")]);
    let (output, report) = write_all(Format::Csv, &columns, &[]);
    assert_eq!(output, "'=danger,\"a,b\",\n");
    assert_eq!(
        report,
        FormatReport {
            rows: 0,
            bytes: output.len() as u64
        }
    );
}

#[test]
fn json_is_one_streamed_array_of_objects_in_column_order() {
    let columns = columns(&[
        ("z", "varchar"),
        ("a", "bigint"),
        ("nested", "row(x integer)"),
    ]);
    let pages = vec![
        vec![vec![
            json!("quote \" backslash \\ newline \n tab \t"),
            json!(1),
            json!({"x": 1}),
        ]],
        vec![
            vec![json!("ünïcödé ✓ \u{1F600}"), Value::Null, json!([1, [2]])],
            vec![
                json!("\u{0001}"),
                json!(-9_007_199_254_740_993_i64),
                Value::Null,
            ],
        ],
    ];
    let (output, report) = write_all(Format::Json, &columns, &pages);
    assert_eq!(
        output,
        "[\n\
         {\"z\":\"quote \\\" backslash \\\\ newline \\n tab \\t\",\"a\":1,\"nested\":{\"x\":1}},\n\
         {\"z\":\"ünïcödé ✓ \u{1F600}\",\"a\":null,\"nested\":[1,[2]]},\n\
         {\"z\":\"\\u0001\",\"a\":-9007199254740993,\"nested\":null}\n\
         ]\n"
    );
    assert_eq!(report.rows, 3);
    let parsed: Value = serde_json::from_str(&output).expect("valid json");
    assert_eq!(parsed.as_array().map(Vec::len), Some(3));
}

#[test]
fn json_of_no_rows_is_an_empty_array() {
    let (output, report) = write_all(Format::Json, &columns(&[("a", "bigint")]), &[vec![]]);
    assert_eq!(output, "[\n]\n");
    assert_eq!(
        serde_json::from_str::<Value>(&output).expect("valid"),
        json!([])
    );
    assert_eq!(report.rows, 0);
    let (output, _) = write_all(Format::Jsonl, &columns(&[("a", "bigint")]), &[]);
    assert_eq!(output, "");
}

#[test]
fn jsonl_is_one_object_per_line() {
    let columns = columns(&[("id", "bigint"), ("text", "varchar")]);
    let pages = vec![
        vec![vec![json!(1), json!("line\nbreak")]],
        vec![
            vec![json!(2), json!("</script>")],
            vec![json!(3), Value::Null],
        ],
    ];
    let (output, _) = write_all(Format::Jsonl, &columns, &pages);
    assert_eq!(
        output,
        "{\"id\":1,\"text\":\"line\\nbreak\"}\n\
         {\"id\":2,\"text\":\"</script>\"}\n\
         {\"id\":3,\"text\":null}\n"
    );
    for line in output.lines() {
        serde_json::from_str::<Value>(line).expect("each line is json");
    }
}

#[test]
fn repeated_and_empty_column_names_become_unique_keys() {
    let columns = columns(&[
        ("a", "bigint"),
        ("a", "bigint"),
        ("", "bigint"),
        ("a_2", "bigint"),
    ]);
    let (output, _) = write_all(
        Format::Jsonl,
        &columns,
        &[vec![vec![json!(1), json!(2), json!(3), json!(4)]]],
    );
    assert_eq!(output, "{\"a\":1,\"a_2\":2,\"_col2\":3,\"a_2_2\":4}\n");
    // CSV keeps the names as Trino gave them: a header may repeat a name.
    let (output, _) = write_all(Format::Csv, &columns, &[]);
    assert_eq!(output, "a,a,,a_2\n");
}

#[test]
fn misuse_and_bad_rows_are_errors_not_panics() {
    let mut writer = RowWriter::new(Format::Csv, Vec::new()).expect("csv");
    assert!(matches!(
        writer.write_rows(&[vec![json!(1)]]),
        Err(FormatError::Misuse(_))
    ));
    writer
        .begin(&columns(&[("a", "bigint"), ("b", "bigint")]))
        .expect("begin");
    assert!(matches!(writer.begin(&[]), Err(FormatError::Misuse(_))));
    writer
        .write_rows(&[vec![json!(1), json!(2)]])
        .expect("a good row");
    let error = writer
        .write_rows(&[vec![json!(1), json!(2)], vec![json!(3)]])
        .expect_err("a short row");
    assert_eq!(
        error.to_string(),
        "row 2 has 1 values but the result has 2 columns"
    );
    assert_eq!(
        writer.rows_written(),
        1,
        "nothing of the bad page was written"
    );
    let (report, output) = writer.finish().expect("finish");
    assert_eq!(output, b"a,b\n1,2\n");
    assert_eq!(report.rows, 1);

    let writer = RowWriter::new(Format::Json, Vec::new()).expect("json");
    assert!(matches!(writer.finish(), Err(FormatError::Misuse(_))));
}

#[test]
fn output_errors_surface_as_io_errors() {
    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("disk full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    for format in [Format::Csv, Format::Json, Format::Jsonl] {
        let mut writer = RowWriter::new(format, Broken).expect("available");
        let outcome = writer
            .begin(&columns(&[("a", "bigint")]))
            .and_then(|()| writer.write_rows(&[vec![json!(1)]]));
        let error = outcome.expect_err("the output fails");
        assert!(matches!(error, FormatError::Io(_)), "{format}: {error:?}");
        assert_eq!(error.to_string(), "could not write the export output");
    }
}

#[test]
fn a_chunk_buffer_is_drained_page_by_page_and_progress_is_visible() {
    let buffer = ChunkBuffer::new();
    let mut writer = RowWriter::new(Format::Jsonl, buffer.clone()).expect("jsonl");
    let progress = writer.progress();
    writer.begin(&columns(&[("n", "bigint")])).expect("begin");
    assert!(buffer.is_empty());
    let mut chunks = Vec::new();
    for page in 0..3 {
        writer
            .write_rows(&[vec![json!(page)], vec![json!(page + 10)]])
            .expect("page");
        assert_eq!(progress.rows(), (page + 1) * 2);
        assert_eq!(progress.bytes(), writer.bytes_written());
        chunks.push(buffer.take());
        assert!(buffer.is_empty());
    }
    let (report, _) = writer.finish().expect("finish");
    assert_eq!(
        chunks.concat(),
        b"{\"n\":0}\n{\"n\":10}\n{\"n\":1}\n{\"n\":11}\n{\"n\":2}\n{\"n\":12}\n"
    );
    assert_eq!(report, FormatReport { rows: 6, bytes: 51 });
}

/// An output that records the largest amount it ever held between drains, standing in
/// for the sink: the export loop drains after every page.
#[derive(Default)]
struct HighWater {
    held: usize,
    most_held: usize,
    total: u64,
}

impl Write for HighWater {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.held += bytes.len();
        self.most_held = self.most_held.max(self.held);
        self.total += bytes.len() as u64;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A page of `rows` synthetic rows starting at `first`, about 100 bytes each as text.
fn synthetic_page(first: u64, rows: u64) -> Vec<Vec<Value>> {
    (first..first + rows)
        .map(|n| {
            vec![
                json!(n),
                json!(format!("customer-{n:012}")),
                json!(format!("{}.{:02}", n % 100_000, n % 100)),
                json!(n % 3 == 0),
                json!("2024-01-31 12:34:56.789"),
                json!(format!("=formula {n} with a longer tail of text")),
            ]
        })
        .collect()
}

fn synthetic_columns() -> Vec<ColumnSpec> {
    columns(&[
        ("id", "bigint"),
        ("customer", "varchar"),
        ("amount", "decimal(12,2)"),
        ("flag", "boolean"),
        ("at", "timestamp(3)"),
        ("note", "varchar"),
    ])
}

#[test]
fn large_text_streams_hand_on_every_page_and_hold_nothing_back() {
    const PAGES: u64 = 100;
    const PAGE_ROWS: u64 = 2_000;
    for format in [Format::Csv, Format::Json, Format::Jsonl] {
        let buffer = ChunkBuffer::new();
        let mut writer = RowWriter::new(format, buffer.clone()).expect("available");
        writer.begin(&synthetic_columns()).expect("begin");
        let mut sink = HighWater::default();
        let mut largest_chunk = 0;
        for page in 0..PAGES {
            writer
                .write_rows(&synthetic_page(page * PAGE_ROWS, PAGE_ROWS))
                .expect("page");
            let chunk = buffer.take();
            largest_chunk = largest_chunk.max(chunk.len());
            sink.write_all(&chunk).expect("sink");
            // What the sink got is everything the writer counted: nothing is held back
            // inside the writer between pages.
            assert_eq!(sink.total, writer.bytes_written(), "{format}");
            assert_eq!(writer.buffered_bytes(), 0);
            sink.held = 0;
        }
        let (report, _) = writer.finish().expect("finish");
        sink.write_all(&buffer.take()).expect("sink");
        assert_eq!(report.rows, PAGES * PAGE_ROWS);
        assert_eq!(report.bytes, sink.total);
        // 20 MB or so went through, never more than about one page at a time.
        assert!(report.bytes > 15_000_000, "{format}: {}", report.bytes);
        assert!(
            largest_chunk < 400_000,
            "{format}: a chunk of {largest_chunk} bytes"
        );
        assert!(sink.most_held < 400_000, "{format}");
    }
}
