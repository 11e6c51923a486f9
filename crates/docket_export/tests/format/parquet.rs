//! Parquet (feature `parquet`): the schema mapped from Trino types, the values read back
//! with the parquet crate's reader, value errors, and row groups that bound memory.

use std::sync::Arc;

use arrow_array::cast::AsArray as _;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType,
};
use arrow_array::{Array as _, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use bytes::Bytes;
use docket_export::format::{
    ChunkBuffer, ColumnSpec, Format, FormatError, RowWriter, WriterOptions,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Value, json};

use super::{columns, synthetic_columns, synthetic_page};

fn read_back(bytes: Vec<u8>) -> (Arc<Schema>, Vec<RecordBatch>, usize) {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes)).expect("a parquet file");
    let row_groups = builder.metadata().num_row_groups();
    let schema = Arc::clone(builder.schema());
    let batches = builder
        .build()
        .expect("reader")
        .collect::<Result<Vec<_>, _>>()
        .expect("batches");
    (schema, batches, row_groups)
}

#[test]
fn trino_types_map_to_an_arrow_schema_and_values_read_back() {
    let columns: Vec<ColumnSpec> = [
        ("b", "boolean"),
        ("i8", "tinyint"),
        ("i16", "smallint"),
        ("i32", "integer"),
        ("i64", "bigint"),
        ("f32", "real"),
        ("f64", "double"),
        ("dec", "decimal(10,2)"),
        ("s", "varchar(20)"),
        ("c", "char(3)"),
        ("bin", "varbinary"),
        ("d", "date"),
        ("ts", "timestamp(3)"),
        ("ts9", "timestamp(9)"),
        ("tstz", "timestamp(3) with time zone"),
        ("j", "json"),
        ("arr", "array(integer)"),
        ("m", "map(varchar, bigint)"),
        ("r", "row(x integer, y varchar)"),
    ]
    .iter()
    .map(|(name, trino_type)| ColumnSpec::new(*name, *trino_type))
    .collect();
    let rows = vec![
        vec![
            json!(true),
            json!(-128),
            json!(32_767),
            json!(-2_147_483_648_i64),
            json!(9_007_199_254_740_993_i64),
            json!(1.5),
            json!(-0.25),
            json!("-12.34"),
            json!("héllo"),
            json!("ab "),
            json!("AAEC/w=="),
            json!("2024-02-29"),
            json!("2024-01-31 12:34:56.789"),
            json!("2024-01-31 12:34:56.123456789"),
            json!("2024-01-31 12:34:56.789 UTC"),
            json!("{\"k\":[1,2]}"),
            json!([1, 2, 3]),
            json!({"a": 1}),
            json!([7, "seven"]),
        ],
        vec![Value::Null; 19],
        vec![
            json!(false),
            json!(0),
            json!(0),
            json!(0),
            json!(0),
            json!("NaN"),
            json!("-Infinity"),
            json!("0.00"),
            json!(""),
            json!("xyz"),
            json!(""),
            json!("1969-12-31"),
            json!("1970-01-01 00:00:00.000"),
            json!("1970-01-01 00:00:00.000000000"),
            json!("1970-01-01 00:00:00.000 Europe/Paris"),
            json!("null"),
            json!([]),
            json!({}),
            json!([null, null]),
        ],
    ];
    let mut writer = RowWriter::new(Format::Parquet, Vec::new()).expect("parquet built in");
    writer.begin(&columns).expect("begin");
    writer.write_rows(&rows).expect("rows");
    let (report, output) = writer.finish().expect("finish");
    assert_eq!(report.rows, 3);
    assert_eq!(report.bytes, output.len() as u64);
    assert_eq!(&output[..4], b"PAR1");

    let (schema, batches, _) = read_back(output);
    let expected_types = [
        DataType::Boolean,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Float32,
        DataType::Float64,
        DataType::Decimal128(10, 2),
        DataType::Utf8,
        DataType::Utf8,
        DataType::Binary,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Utf8,
        DataType::Utf8,
        DataType::Utf8,
        DataType::Utf8,
        DataType::Utf8,
        DataType::Utf8,
    ];
    let expected_fields: Vec<Field> = columns
        .iter()
        .zip(expected_types)
        .map(|(column, data_type)| Field::new(&column.name, data_type, true))
        .collect();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|field| field.as_ref().clone())
        .collect();
    assert_eq!(fields, expected_fields);

    assert_eq!(batches.len(), 1);
    let batch = &batches[0];
    assert_eq!(batch.num_rows(), 3);
    let column = |name: &str| batch.column_by_name(name).expect(name);

    assert!(column("b").as_boolean().value(0));
    assert!(!column("b").as_boolean().value(2));
    assert_eq!(column("i8").as_primitive::<Int8Type>().value(0), -128);
    assert_eq!(column("i16").as_primitive::<Int16Type>().value(0), 32_767);
    assert_eq!(
        column("i32").as_primitive::<Int32Type>().value(0),
        -2_147_483_648
    );
    assert_eq!(
        column("i64").as_primitive::<Int64Type>().value(0),
        9_007_199_254_740_993
    );
    assert_eq!(column("f32").as_primitive::<Float32Type>().value(0), 1.5);
    assert!(
        column("f32")
            .as_primitive::<Float32Type>()
            .value(2)
            .is_nan()
    );
    assert_eq!(column("f64").as_primitive::<Float64Type>().value(0), -0.25);
    assert_eq!(
        column("f64").as_primitive::<Float64Type>().value(2),
        f64::NEG_INFINITY
    );
    assert_eq!(
        column("dec").as_primitive::<Decimal128Type>().value(0),
        -1_234
    );
    assert_eq!(column("dec").as_primitive::<Decimal128Type>().value(2), 0);
    assert_eq!(column("s").as_string::<i32>().value(0), "héllo");
    assert_eq!(column("c").as_string::<i32>().value(0), "ab ");
    assert_eq!(column("bin").as_binary::<i32>().value(0), [0, 1, 2, 255]);
    assert_eq!(column("bin").as_binary::<i32>().value(2), [] as [u8; 0]);
    assert_eq!(column("d").as_primitive::<Date32Type>().value(0), 19_782);
    assert_eq!(column("d").as_primitive::<Date32Type>().value(2), -1);
    assert_eq!(
        column("ts")
            .as_primitive::<TimestampMicrosecondType>()
            .value(0),
        1_706_704_496_789_000
    );
    assert_eq!(
        column("ts")
            .as_primitive::<TimestampMicrosecondType>()
            .value(2),
        0
    );
    assert_eq!(
        column("ts9").as_string::<i32>().value(0),
        "2024-01-31 12:34:56.123456789"
    );
    assert_eq!(
        column("tstz").as_string::<i32>().value(0),
        "2024-01-31 12:34:56.789 UTC"
    );
    assert_eq!(column("j").as_string::<i32>().value(0), "{\"k\":[1,2]}");
    assert_eq!(column("arr").as_string::<i32>().value(0), "[1,2,3]");
    assert_eq!(column("m").as_string::<i32>().value(0), "{\"a\":1}");
    assert_eq!(column("r").as_string::<i32>().value(0), "[7,\"seven\"]");
    assert_eq!(column("r").as_string::<i32>().value(2), "[null,null]");
    for (index, field) in schema.fields().iter().enumerate() {
        assert!(
            batch.column(index).is_null(1),
            "row 1 of {} is null",
            field.name()
        );
        assert_eq!(batch.column(index).null_count(), 1, "{}", field.name());
    }
}

#[test]
fn values_that_do_not_fit_their_column_are_errors_naming_row_and_column() {
    let cases = [
        ("tinyint", json!(300), "300 is out of range"),
        (
            "integer",
            json!("twelve"),
            "expected an integer, found text",
        ),
        ("boolean", json!(1), "expected a boolean, found a number"),
        ("decimal(4,1)", json!("123.45"), "invalid decimal"),
        ("decimal(4,1)", json!("12345"), "invalid decimal"),
        ("date", json!("2023-02-29"), "invalid date"),
        ("timestamp(3)", json!("yesterday"), "invalid timestamp"),
        ("varbinary", json!("not base64!"), "invalid base64"),
        ("double", json!([1.0]), "expected a number, found an array"),
    ];
    for (trino_type, value, fragment) in cases {
        let mut writer = RowWriter::new(Format::Parquet, Vec::new()).expect("parquet");
        writer
            .begin(&[ColumnSpec::new("v", trino_type)])
            .expect("begin");
        writer
            .write_rows(&[vec![Value::Null]])
            .expect("a null fits anything");
        let error = writer
            .write_rows(&[vec![value.clone()]])
            .expect_err("does not fit");
        assert!(
            matches!(error, FormatError::Value { row: 1, .. }),
            "{trino_type} {value}: {error:?}"
        );
        let message = error.to_string();
        assert!(message.starts_with("row 1, column \"v\": "), "{message}");
        assert!(
            message.contains(fragment),
            "{trino_type} {value}: {message}"
        );
    }
}

#[test]
fn large_streams_close_row_groups_and_keep_memory_bounded() {
    const PAGES: u64 = 60;
    const PAGE_ROWS: u64 = 5_000;
    let options = WriterOptions {
        parquet_row_group_rows: 50_000,
        parquet_row_group_bytes: 4 * 1024 * 1024,
        parquet_batch_rows: 4_096,
    };
    let buffer = ChunkBuffer::new();
    let mut writer =
        RowWriter::with_options(Format::Parquet, buffer.clone(), options).expect("parquet");
    writer.begin(&synthetic_columns()).expect("begin");
    let mut file = Vec::new();
    let mut most_buffered = 0;
    let mut drains_with_bytes = 0;
    for page in 0..PAGES {
        writer
            .write_rows(&synthetic_page(page * PAGE_ROWS, PAGE_ROWS))
            .expect("page");
        most_buffered = most_buffered.max(writer.buffered_bytes());
        let chunk = buffer.take();
        if !chunk.is_empty() {
            drains_with_bytes += 1;
        }
        file.extend_from_slice(&chunk);
    }
    let (report, _) = writer.finish().expect("finish");
    file.extend_from_slice(&buffer.take());
    assert_eq!(report.rows, PAGES * PAGE_ROWS);
    assert_eq!(report.bytes, file.len() as u64);

    // Row groups were closed along the way and their bytes handed on, so the writer
    // never held more than about one row group.
    assert!(
        drains_with_bytes >= 5,
        "only {drains_with_bytes} pages produced bytes"
    );
    assert!(
        most_buffered < 8 * 1024 * 1024,
        "{most_buffered} bytes buffered"
    );

    let (_, batches, row_groups) = read_back(file);
    assert!(row_groups >= 6, "{row_groups} row groups");
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows as u64, PAGES * PAGE_ROWS);
    let last = batches.last().expect("a batch");
    let ids = last.column(0).as_primitive::<Int64Type>();
    assert_eq!(ids.value(ids.len() - 1), (PAGES * PAGE_ROWS - 1) as i64);
}

#[test]
fn a_column_of_distinct_values_stops_its_dictionary_early_and_reads_back_whole() {
    const ROWS: i64 = 40_000;
    // Scattered, so that neither the dictionary nor its compression can shrink them.
    let id = |n: i64| n.wrapping_mul(2_654_435_761) % (1 << 40);
    let rows: Vec<Vec<Value>> = (0..ROWS)
        .map(|n| vec![json!(id(n)), json!(format!("category-{}", n % 7))])
        .collect();
    let mut writer = RowWriter::new(Format::Parquet, Vec::new()).expect("parquet");
    writer
        .begin(&columns(&[("id", "bigint"), ("category", "varchar")]))
        .expect("begin");
    for page in rows.chunks(4_096) {
        writer.write_rows(page).expect("page");
    }
    let (_, output) = writer.finish().expect("finish");

    let builder = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(output.clone()))
        .expect("a parquet file");
    let row_group = builder.metadata().row_group(0);
    // The distinct ids would make a dictionary of 320 kB; it stops at its cap and the
    // rest of the column is written plain.
    let ids = row_group.column(0);
    let dictionary_bytes = ids.data_page_offset() - ids.dictionary_page_offset().expect("begun");
    assert!(
        dictionary_bytes < 160 * 1024,
        "{dictionary_bytes} bytes of dictionary"
    );
    // Seven categories stay in a dictionary.
    assert!(row_group.column(1).dictionary_page_offset().is_some());

    let (_, batches, _) = read_back(output);
    let (mut read_ids, mut read_categories) = (Vec::new(), Vec::new());
    for batch in &batches {
        read_ids.extend(
            batch
                .column(0)
                .as_primitive::<Int64Type>()
                .values()
                .iter()
                .copied(),
        );
        let categories = batch.column(1).as_string::<i32>();
        read_categories.extend(
            categories
                .iter()
                .map(|value| value.expect("not null").to_owned()),
        );
    }
    assert_eq!(read_ids, (0..ROWS).map(id).collect::<Vec<_>>());
    assert_eq!(
        read_categories,
        (0..ROWS)
            .map(|n| format!("category-{}", n % 7))
            .collect::<Vec<_>>()
    );
}
