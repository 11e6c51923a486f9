//! Parquet pages (feature `parquet`): the footer is read first, then the parquet
//! crate's push decoder, told the page's offset and limit and the shown columns, asks
//! for the byte ranges it needs (the row groups and pages holding those rows) and
//! gets them through ranged reads of the sink, so a page far into a large file reads
//! little more than the footer and the page's own data.
//!
//! The push decoder is what the parquet crate's async reader drives internally; using
//! it directly lets the reads borrow the caller's sink, where the async reader wants a
//! reader it can own for `'static`.

use std::ops::Range;
use std::sync::Arc;

use ::parquet::DecodeResult;
use ::parquet::arrow::ProjectionMask;
use ::parquet::arrow::push_decoder::ParquetPushDecoderBuilder;
use ::parquet::file::metadata::ParquetMetaDataPushDecoder;
use arrow_array::cast::AsArray as _;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type,
    Int32Type, Int64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;

use super::error::ViewError;
use super::limits::{MAX_CELL_CHARS, MAX_COLUMNS, MAX_PARQUET_READ_BYTES, shown_cell};
use super::page::RowPage;
use crate::sink::ObjectSink;

/// Requested ranges closer together than this are read with one request.
const MAX_GAP_BYTES: u64 = 64 * 1024;

/// The page of `rows` rows from `first_row` of a Parquet asset.
///
/// # Errors
///
/// [`ViewError::Parquet`] for a file the parquet crate cannot read;
/// [`ViewError::TooLarge`] when the page needs more than [`MAX_PARQUET_READ_BYTES`];
/// errors from reading.
pub(super) async fn page(
    sink: &dyn ObjectSink,
    key: &str,
    first_row: u64,
    rows: usize,
) -> Result<RowPage, ViewError> {
    let object_size = sink.size(key).await?;
    let mut reads = RangeReads {
        sink,
        key,
        object_size,
        read_bytes: 0,
    };
    let mut footer =
        ParquetMetaDataPushDecoder::try_new(object_size).map_err(ViewError::Parquet)?;
    let metadata = loop {
        match footer.try_decode().map_err(ViewError::Parquet)? {
            DecodeResult::NeedsData(ranges) => {
                let data = reads.fetch(&ranges).await?;
                footer
                    .push_ranges(ranges, data)
                    .map_err(ViewError::Parquet)?;
            }
            DecodeResult::Data(metadata) => break metadata,
            DecodeResult::Finished => {
                return Err(ViewError::malformed("the parquet asset has no metadata"));
            }
        }
    };
    let total_rows = u64::try_from(metadata.file_metadata().num_rows())
        .map_err(|_| ViewError::malformed("the parquet asset has a negative row count"))?;
    let builder = ParquetPushDecoderBuilder::try_new_decoder(Arc::new(metadata))
        .map_err(ViewError::Parquet)?;
    let fields = builder.schema().fields();
    let shown_columns = fields.len().min(MAX_COLUMNS);
    let columns: Vec<String> = fields
        .iter()
        .take(MAX_COLUMNS)
        .map(|field| shown_cell(field.name()))
        .collect();
    if first_row >= total_rows || rows == 0 {
        return Ok(RowPage {
            columns,
            rows: Vec::new(),
            first_row,
            more: first_row < total_rows,
        });
    }
    let offset = usize::try_from(first_row)
        .map_err(|_| ViewError::malformed("the first row is past what this machine can count"))?;
    let projection = ProjectionMask::roots(builder.parquet_schema(), 0..shown_columns);
    let mut decoder = builder
        .with_projection(projection)
        .with_offset(offset)
        .with_limit(rows)
        .with_batch_size(rows)
        .build()
        .map_err(ViewError::Parquet)?;
    let mut page_rows = Vec::with_capacity(rows);
    loop {
        match decoder.try_decode().map_err(ViewError::Parquet)? {
            DecodeResult::NeedsData(ranges) => {
                let data = reads.fetch(&ranges).await?;
                decoder
                    .push_ranges(ranges, data)
                    .map_err(ViewError::Parquet)?;
            }
            DecodeResult::Data(batch) => push_rows(&mut page_rows, &batch),
            DecodeResult::Finished => break,
        }
    }
    let more = first_row + (page_rows.len() as u64) < total_rows;
    Ok(RowPage {
        columns,
        rows: page_rows,
        first_row,
        more,
    })
}

/// Ranged reads of one object, within [`MAX_PARQUET_READ_BYTES`] in all.
struct RangeReads<'a> {
    sink: &'a dyn ObjectSink,
    key: &'a str,
    object_size: u64,
    read_bytes: u64,
}

impl RangeReads<'_> {
    /// The bytes of each range, in order; ranges close together are read at once.
    async fn fetch(&mut self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>, ViewError> {
        if ranges
            .iter()
            .any(|range| range.start > range.end || range.end > self.object_size)
        {
            return Err(ViewError::malformed(
                "the parquet asset's metadata points past its end",
            ));
        }
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&index| ranges[index].start);
        let mut data = vec![Bytes::new(); ranges.len()];
        let mut first = 0;
        while first < order.len() {
            let run_start = ranges[order[first]].start;
            let mut run_end = ranges[order[first]].end;
            let mut last = first;
            while let Some(&next) = order.get(last + 1) {
                if ranges[next].start > run_end.saturating_add(MAX_GAP_BYTES) {
                    break;
                }
                run_end = run_end.max(ranges[next].end);
                last += 1;
            }
            let run = self.read(run_start..run_end).await?;
            for &index in &order[first..=last] {
                let range = &ranges[index];
                let start = usize::try_from(range.start - run_start).unwrap_or(usize::MAX);
                let end = usize::try_from(range.end - run_start).unwrap_or(usize::MAX);
                // Within the run by construction; checked all the same, as slicing panics.
                if start <= end && end <= run.len() {
                    data[index] = run.slice(start..end);
                }
            }
            first = last + 1;
        }
        Ok(data)
    }

    /// The bytes of `range`, from a read that starts there and stops once it has them.
    async fn read(&mut self, range: Range<u64>) -> Result<Bytes, ViewError> {
        let wanted = range.end - range.start;
        self.read_bytes += wanted;
        if self.read_bytes > MAX_PARQUET_READ_BYTES {
            return Err(ViewError::TooLarge {
                what: "what a parquet page needs",
                limit_bytes: MAX_PARQUET_READ_BYTES,
            });
        }
        let wanted = usize::try_from(wanted).unwrap_or(usize::MAX);
        let content = self.sink.open_at(self.key, range.start).await?;
        let mut chunks = content.into_stream();
        let mut bytes = BytesMut::with_capacity(wanted);
        while bytes.len() < wanted {
            let Some(chunk) = chunks.next().await else {
                return Err(ViewError::malformed(
                    "the parquet asset is shorter than its metadata says",
                ));
            };
            let chunk = chunk?;
            let take = chunk.len().min(wanted - bytes.len());
            bytes.extend_from_slice(&chunk[..take]);
        }
        Ok(bytes.freeze())
    }
}

/// Appends the rows of `batch` as text cells.
fn push_rows(page_rows: &mut Vec<Vec<String>>, batch: &RecordBatch) {
    for row in 0..batch.num_rows() {
        page_rows.push(
            batch
                .columns()
                .iter()
                .map(|column| cell_text(column.as_ref(), row))
                .collect(),
        );
    }
}

/// One cell as text: empty for null, numbers and dates as written, binary as base64
/// (as Trino sends it), and a type the export never writes as `[type]`.
fn cell_text(column: &dyn Array, row: usize) -> String {
    if column.is_null(row) {
        return String::new();
    }
    let text = match column.data_type() {
        DataType::Boolean => column
            .as_boolean_opt()
            .map(|values| values.value(row).to_string()),
        DataType::Int8 => number::<Int8Type>(column, row),
        DataType::Int16 => number::<Int16Type>(column, row),
        DataType::Int32 => number::<Int32Type>(column, row),
        DataType::Int64 => number::<Int64Type>(column, row),
        DataType::UInt8 => number::<UInt8Type>(column, row),
        DataType::UInt16 => number::<UInt16Type>(column, row),
        DataType::UInt32 => number::<UInt32Type>(column, row),
        DataType::UInt64 => number::<UInt64Type>(column, row),
        DataType::Float32 => column
            .as_primitive_opt::<Float32Type>()
            .map(|values| float_text(values.value(row), values.value(row).is_infinite())),
        DataType::Float64 => column
            .as_primitive_opt::<Float64Type>()
            .map(|values| float_text(values.value(row), values.value(row).is_infinite())),
        DataType::Decimal128(_, _) => column
            .as_primitive_opt::<Decimal128Type>()
            .map(|values| values.value_as_string(row)),
        DataType::Utf8 => column
            .as_string_opt::<i32>()
            .map(|values| shown_cell(values.value(row))),
        DataType::LargeUtf8 => column
            .as_string_opt::<i64>()
            .map(|values| shown_cell(values.value(row))),
        DataType::Utf8View => column
            .as_string_view_opt()
            .map(|values| shown_cell(values.value(row))),
        DataType::Binary => column
            .as_binary_opt::<i32>()
            .map(|values| binary_text(values.value(row))),
        DataType::LargeBinary => column
            .as_binary_opt::<i64>()
            .map(|values| binary_text(values.value(row))),
        DataType::Date32 => column
            .as_primitive_opt::<Date32Type>()
            .and_then(|values| values.value_as_date(row))
            .map(|date| date.to_string()),
        DataType::Date64 => column
            .as_primitive_opt::<Date64Type>()
            .and_then(|values| values.value_as_date(row))
            .map(|date| date.to_string()),
        DataType::Timestamp(TimeUnit::Second, None) => {
            timestamp::<TimestampSecondType>(column, row)
        }
        DataType::Timestamp(TimeUnit::Millisecond, None) => {
            timestamp::<TimestampMillisecondType>(column, row)
        }
        DataType::Timestamp(TimeUnit::Microsecond, None) => {
            timestamp::<TimestampMicrosecondType>(column, row)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, None) => {
            timestamp::<TimestampNanosecondType>(column, row)
        }
        _ => None,
    };
    let text = text.unwrap_or_else(|| format!("[{}]", column.data_type()));
    shown_cell(&text)
}

fn number<T: ArrowPrimitiveType>(column: &dyn Array, row: usize) -> Option<String>
where
    T::Native: ToString,
{
    column
        .as_primitive_opt::<T>()
        .map(|values| values.value(row).to_string())
}

fn timestamp<T: arrow_array::types::ArrowTimestampType>(
    column: &dyn Array,
    row: usize,
) -> Option<String> {
    column
        .as_primitive_opt::<T>()
        .and_then(|values| values.value_as_datetime(row))
        .map(|datetime| datetime.to_string())
}

/// A float as Trino writes one: `Infinity` and `-Infinity` rather than Rust's `inf`.
fn float_text<F: PartialOrd + Default + ToString>(value: F, infinite: bool) -> String {
    match (infinite, value > F::default()) {
        (true, true) => "Infinity".to_owned(),
        (true, false) => "-Infinity".to_owned(),
        (false, _) => value.to_string(),
    }
}

/// Binary as base64, encoding no more than a shown cell can hold.
fn binary_text(value: &[u8]) -> String {
    // Four characters per three bytes: this many bytes encode to just over the limit,
    // so `shown_cell` still sees that the cell was cut.
    let most_bytes = MAX_CELL_CHARS / 4 * 3 + 3;
    BASE64.encode(&value[..value.len().min(most_bytes)])
}
