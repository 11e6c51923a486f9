//! Parquet through arrow: Trino types become an Arrow schema, rows are gathered into
//! batches of a few thousand and encoded, and a row group is closed every so many rows
//! or bytes, so memory stays bounded by one batch plus one encoded row group.
//!
//! Type mapping (all columns nullable):
//!
//! | Trino | Arrow / Parquet |
//! |---|---|
//! | `boolean` | Boolean |
//! | `tinyint`, `smallint`, `integer`, `bigint` | Int8, Int16, Int32, Int64 |
//! | `real`, `double` | Float32, Float64 (`NaN`, `Infinity` accepted as text) |
//! | `decimal(p, s)` | Decimal128(p, s) |
//! | `varchar`, `char` | Utf8 |
//! | `varbinary` | Binary (Trino sends base64) |
//! | `date` | Date32 |
//! | `timestamp(p)`, p ≤ 6 | Timestamp(microsecond, no zone) |
//! | `timestamp(p)`, p > 6; zoned timestamps, `time`, `json`, `uuid`, intervals … | Utf8, as Trino writes them |
//! | `array`, `map`, `row` | Utf8 holding the value's JSON text |

use std::io::Write;
use std::sync::Arc;

use crate::cells::{Cell, Row};
use ::parquet::arrow::ArrowWriter;
use ::parquet::basic::Compression;
use ::parquet::file::properties::WriterProperties;
use arrow_array::builder::{
    BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int8Builder, Int16Builder, Int32Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::spec::{ColumnSpec, FormatError, WriterOptions};
use super::trino_type::TrinoType;

/// The largest decimal precision Arrow's Decimal128 (and Trino) holds.
const MAX_DECIMAL_PRECISION: u8 = 38;

/// The bytes per value a text or binary column's first batch is sized for; later
/// batches are sized by the one before, up to [`TEXT_BYTES_RESERVED`].
const TEXT_BYTES_GUESS: usize = 16;

/// The most bytes a text or binary column sets aside for its next batch: the batch
/// before is still being encoded when they are, so a column of long values must not
/// hold twice its batch; past this it grows as it fills.
const TEXT_BYTES_RESERVED: usize = 1024 * 1024;

/// The largest dictionary a column chunk builds before it falls back to plain encoding
/// (the parquet crate's default is 1 MiB). A dictionary pays off while a column has few
/// distinct values: at an eighth of a 128 Ki-row group's plain `bigint`s it still cuts
/// the column to about a third, and beyond that little is saved. Building one costs a
/// hash and a lookup per value, and for a column of unique values (ids, names) every
/// value is new until the dictionary is full: with the default, interning those values
/// and growing the table took a fifth of the server's time in the export benchmark.
const DICTIONARY_PAGE_BYTES: usize = 128 * 1024;

pub(super) struct ParquetEncoder<W: Write + Send> {
    writer: ArrowWriter<W>,
    schema: SchemaRef,
    columns: Vec<Column>,
    pending_rows: usize,
    batch_rows: usize,
}

impl<W: Write + Send> ParquetEncoder<W> {
    pub(super) fn begin(
        output: W,
        columns: &[ColumnSpec],
        names: &[String],
        options: &WriterOptions,
    ) -> Result<Self, FormatError> {
        let batch_rows = options.parquet_batch_rows.max(1);
        let columns: Vec<Column> = columns
            .iter()
            .zip(names)
            .map(|(spec, name)| Column::new(name, &spec.trino_type, batch_rows))
            .collect();
        let schema: SchemaRef = Arc::new(Schema::new(
            columns
                .iter()
                .map(|column| Field::new(&column.name, column.builder.data_type(), true))
                .collect::<Vec<_>>(),
        ));
        let properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
            .set_max_row_group_row_count(Some(options.parquet_row_group_rows.max(1)))
            .set_max_row_group_bytes(Some(options.parquet_row_group_bytes.max(1)))
            .build();
        let writer = ArrowWriter::try_new(output, Arc::clone(&schema), Some(properties))
            .map_err(FormatError::Parquet)?;
        Ok(Self {
            writer,
            schema,
            columns,
            pending_rows: 0,
            batch_rows,
        })
    }

    pub(super) fn write_rows<R: Row>(
        &mut self,
        rows: impl Iterator<Item = R>,
        first_row: u64,
    ) -> Result<(), FormatError> {
        for (offset, row) in rows.enumerate() {
            for (column, value) in self.columns.iter_mut().zip(row.cells()) {
                column
                    .builder
                    .append(&value)
                    .map_err(|reason| FormatError::Value {
                        row: first_row + offset as u64,
                        column: column.name.clone(),
                        reason,
                    })?;
            }
            self.pending_rows += 1;
            if self.pending_rows >= self.batch_rows {
                self.encode_pending()?;
            }
        }
        Ok(())
    }

    /// The encoded size of the open row group plus the rows not yet encoded, roughly.
    pub(super) fn buffered_bytes(&self) -> u64 {
        self.writer.in_progress_size() as u64
    }

    pub(super) fn finish(mut self) -> Result<W, FormatError> {
        self.encode_pending()?;
        self.writer.into_inner().map_err(FormatError::Parquet)
    }

    /// Encodes the gathered rows as one batch; the writer closes row groups as they fill.
    fn encode_pending(&mut self) -> Result<(), FormatError> {
        if self.pending_rows == 0 {
            return Ok(());
        }
        let batch_rows = self.batch_rows;
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .map(|column| {
                // A finished builder starts again from nothing and would grow (copying
                // what it holds) several times per batch; start it at a batch's size.
                let next = column.builder.empty_like(batch_rows);
                std::mem::replace(&mut column.builder, next).finish()
            })
            .collect();
        let options = RecordBatchOptions::new().with_row_count(Some(self.pending_rows));
        let batch = RecordBatch::try_new_with_options(Arc::clone(&self.schema), arrays, &options)
            .map_err(|error| FormatError::Parquet(error.into()))?;
        self.pending_rows = 0;
        self.writer.write(&batch).map_err(FormatError::Parquet)
    }
}

struct Column {
    name: String,
    builder: Builder,
}

impl Column {
    /// A column of `trino_type`, its builder sized for `rows` values.
    fn new(name: &str, trino_type: &str, rows: usize) -> Self {
        let builder = match TrinoType::parse(trino_type) {
            TrinoType::Boolean => Builder::Boolean(BooleanBuilder::with_capacity(rows)),
            TrinoType::TinyInt => Builder::Int8(Int8Builder::with_capacity(rows)),
            TrinoType::SmallInt => Builder::Int16(Int16Builder::with_capacity(rows)),
            TrinoType::Integer => Builder::Int32(Int32Builder::with_capacity(rows)),
            TrinoType::BigInt => Builder::Int64(Int64Builder::with_capacity(rows)),
            TrinoType::Real => Builder::Float32(Float32Builder::with_capacity(rows)),
            TrinoType::Double => Builder::Float64(Float64Builder::with_capacity(rows)),
            TrinoType::Decimal { precision, scale }
                if (1..=MAX_DECIMAL_PRECISION).contains(&precision)
                    && (0..=precision as i8).contains(&scale) =>
            {
                match Decimal128Builder::with_capacity(rows)
                    .with_precision_and_scale(precision, scale)
                {
                    Ok(builder) => Builder::Decimal {
                        builder,
                        precision,
                        scale,
                    },
                    Err(_) => {
                        Builder::Text(StringBuilder::with_capacity(rows, rows * TEXT_BYTES_GUESS))
                    }
                }
            }
            TrinoType::Binary => {
                Builder::Binary(BinaryBuilder::with_capacity(rows, rows * TEXT_BYTES_GUESS))
            }
            TrinoType::Date => Builder::Date(Date32Builder::with_capacity(rows)),
            TrinoType::Timestamp { precision } if precision <= 6 => {
                Builder::Timestamp(TimestampMicrosecondBuilder::with_capacity(rows))
            }
            TrinoType::Decimal { .. }
            | TrinoType::Text
            | TrinoType::Timestamp { .. }
            | TrinoType::Other => {
                Builder::Text(StringBuilder::with_capacity(rows, rows * TEXT_BYTES_GUESS))
            }
        };
        Self {
            name: name.to_owned(),
            builder,
        }
    }
}

/// One column's array under construction.
enum Builder {
    Boolean(BooleanBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Decimal {
        builder: Decimal128Builder,
        precision: u8,
        scale: i8,
    },
    Text(StringBuilder),
    Binary(BinaryBuilder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
}

impl Builder {
    fn data_type(&self) -> DataType {
        match self {
            Self::Boolean(_) => DataType::Boolean,
            Self::Int8(_) => DataType::Int8,
            Self::Int16(_) => DataType::Int16,
            Self::Int32(_) => DataType::Int32,
            Self::Int64(_) => DataType::Int64,
            Self::Float32(_) => DataType::Float32,
            Self::Float64(_) => DataType::Float64,
            Self::Decimal {
                precision, scale, ..
            } => DataType::Decimal128(*precision, *scale),
            Self::Text(_) => DataType::Utf8,
            Self::Binary(_) => DataType::Binary,
            Self::Date(_) => DataType::Date32,
            Self::Timestamp(_) => DataType::Timestamp(TimeUnit::Microsecond, None),
        }
    }

    /// An empty builder of the same type, with room for `rows` values (and, for text
    /// and binary, as many bytes as this one holds, as batches are alike, up to
    /// [`TEXT_BYTES_RESERVED`]).
    fn empty_like(&self, rows: usize) -> Self {
        match self {
            Self::Boolean(_) => Self::Boolean(BooleanBuilder::with_capacity(rows)),
            Self::Int8(_) => Self::Int8(Int8Builder::with_capacity(rows)),
            Self::Int16(_) => Self::Int16(Int16Builder::with_capacity(rows)),
            Self::Int32(_) => Self::Int32(Int32Builder::with_capacity(rows)),
            Self::Int64(_) => Self::Int64(Int64Builder::with_capacity(rows)),
            Self::Float32(_) => Self::Float32(Float32Builder::with_capacity(rows)),
            Self::Float64(_) => Self::Float64(Float64Builder::with_capacity(rows)),
            Self::Decimal {
                precision, scale, ..
            } => Self::Decimal {
                builder: Decimal128Builder::with_capacity(rows)
                    .with_data_type(DataType::Decimal128(*precision, *scale)),
                precision: *precision,
                scale: *scale,
            },
            Self::Text(builder) => Self::Text(StringBuilder::with_capacity(
                rows,
                builder.values_slice().len().min(TEXT_BYTES_RESERVED),
            )),
            Self::Binary(builder) => Self::Binary(BinaryBuilder::with_capacity(
                rows,
                builder.values_slice().len().min(TEXT_BYTES_RESERVED),
            )),
            Self::Date(_) => Self::Date(Date32Builder::with_capacity(rows)),
            Self::Timestamp(_) => Self::Timestamp(TimestampMicrosecondBuilder::with_capacity(rows)),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Self::Boolean(builder) => Arc::new(builder.finish()),
            Self::Int8(builder) => Arc::new(builder.finish()),
            Self::Int16(builder) => Arc::new(builder.finish()),
            Self::Int32(builder) => Arc::new(builder.finish()),
            Self::Int64(builder) => Arc::new(builder.finish()),
            Self::Float32(builder) => Arc::new(builder.finish()),
            Self::Float64(builder) => Arc::new(builder.finish()),
            Self::Decimal { builder, .. } => Arc::new(builder.finish()),
            Self::Text(builder) => Arc::new(builder.finish()),
            Self::Binary(builder) => Arc::new(builder.finish()),
            Self::Date(builder) => Arc::new(builder.finish()),
            Self::Timestamp(builder) => Arc::new(builder.finish()),
        }
    }

    /// Appends one value, or says why it does not fit.
    fn append(&mut self, value: &Cell<'_>) -> Result<(), String> {
        if matches!(value, Cell::Null) {
            self.append_null();
            return Ok(());
        }
        match self {
            Self::Boolean(builder) => match value {
                Cell::Bool(flag) => builder.append_value(*flag),
                _ => return Err(mismatch("a boolean", value)),
            },
            Self::Int8(builder) => builder.append_value(integer(value)?),
            Self::Int16(builder) => builder.append_value(integer(value)?),
            Self::Int32(builder) => builder.append_value(integer(value)?),
            Self::Int64(builder) => builder.append_value(integer(value)?),
            // Trino's `real` is 32 bits, so narrowing its JSON rendering loses nothing.
            Self::Float32(builder) => builder.append_value(float(value)? as f32),
            Self::Float64(builder) => builder.append_value(float(value)?),
            Self::Decimal {
                builder,
                precision,
                scale,
            } => builder.append_value(decimal(value, *precision, *scale)?),
            Self::Text(builder) => match value {
                Cell::Text(text) => builder.append_value(text),
                other => builder.append_value(other.to_string()),
            },
            Self::Binary(builder) => match value {
                Cell::Text(text) => builder.append_value(
                    BASE64
                        .decode(text.as_bytes())
                        .map_err(|error| format!("invalid base64 for varbinary: {error}"))?,
                ),
                _ => return Err(mismatch("base64 text", value)),
            },
            Self::Date(builder) => match value {
                Cell::Text(text) => builder.append_value(
                    parse_date(text).ok_or_else(|| format!("invalid date {text:?}"))?,
                ),
                _ => return Err(mismatch("a date as text", value)),
            },
            Self::Timestamp(builder) => match value {
                Cell::Text(text) => builder.append_value(
                    parse_timestamp_micros(text)
                        .ok_or_else(|| format!("invalid timestamp {text:?}"))?,
                ),
                _ => return Err(mismatch("a timestamp as text", value)),
            },
        }
        Ok(())
    }

    fn append_null(&mut self) {
        match self {
            Self::Boolean(builder) => builder.append_null(),
            Self::Int8(builder) => builder.append_null(),
            Self::Int16(builder) => builder.append_null(),
            Self::Int32(builder) => builder.append_null(),
            Self::Int64(builder) => builder.append_null(),
            Self::Float32(builder) => builder.append_null(),
            Self::Float64(builder) => builder.append_null(),
            Self::Decimal { builder, .. } => builder.append_null(),
            Self::Text(builder) => builder.append_null(),
            Self::Binary(builder) => builder.append_null(),
            Self::Date(builder) => builder.append_null(),
            Self::Timestamp(builder) => builder.append_null(),
        }
    }
}

fn mismatch(expected: &str, value: &Cell<'_>) -> String {
    format!("expected {expected}, found {}", value.kind())
}

/// An integer that fits `T`, from a JSON number (or its text).
fn integer<T: TryFrom<i64>>(value: &Cell<'_>) -> Result<T, String> {
    let wide = match value {
        Cell::Number(number) => number.as_i64(),
        Cell::Text(text) => text.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| mismatch("an integer", value))?;
    T::try_from(wide).map_err(|_| format!("{wide} is out of range for the column's type"))
}

/// A floating-point number from a JSON number or Trino's `NaN` / `Infinity` text.
fn float(value: &Cell<'_>) -> Result<f64, String> {
    match value {
        Cell::Number(number) => number.as_f64(),
        Cell::Text(text) => match text.as_ref() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            other => other.trim().parse().ok(),
        },
        _ => None,
    }
    .ok_or_else(|| mismatch("a number", value))
}

/// A decimal's unscaled value at `scale`, from Trino's text (`-123.45`) or a number.
fn decimal(value: &Cell<'_>, precision: u8, scale: i8) -> Result<i128, String> {
    let text = match value {
        Cell::Text(text) => text.trim().to_owned(),
        Cell::Number(number) => number.to_string(),
        _ => return Err(mismatch("a decimal", value)),
    };
    let invalid = || format!("invalid decimal {text:?} for decimal({precision}, {scale})");
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let scale = usize::try_from(scale).map_err(|_| invalid())?;
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty())
        || !all_digits(whole)
        || !all_digits(fraction)
        || fraction.len() > scale
    {
        return Err(invalid());
    }
    let mut unscaled: i128 = 0;
    let padding = std::iter::repeat_n(b'0', scale - fraction.len());
    for digit in whole.bytes().chain(fraction.bytes()).chain(padding) {
        unscaled = unscaled
            .checked_mul(10)
            .and_then(|shifted| shifted.checked_add(i128::from(digit - b'0')))
            .ok_or_else(invalid)?;
    }
    if unscaled >= 10_i128.pow(u32::from(precision)) {
        return Err(invalid());
    }
    Ok(if negative { -unscaled } else { unscaled })
}

/// Days since 1970-01-01 for `YYYY-MM-DD` (a year may have more digits or a sign).
fn parse_date(text: &str) -> Option<i32> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut parts = rest.splitn(3, '-');
    let year: i64 = parts.next()?.parse().ok()?;
    let month: u32 = parts.next()?.parse().ok()?;
    let day: u32 = parts.next()?.parse().ok()?;
    let year = if negative { -year } else { year };
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    i32::try_from(days_from_civil(year, month, day)).ok()
}

/// Microseconds since the epoch for `YYYY-MM-DD HH:MM:SS[.ffffff]` (no zone).
fn parse_timestamp_micros(text: &str) -> Option<i64> {
    let (date, time) = text.split_once([' ', 'T'])?;
    let days = i64::from(parse_date(date)?);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut fields = clock.splitn(3, ':');
    let hour: i64 = fields.next()?.parse().ok()?;
    let minute: i64 = fields.next()?.parse().ok()?;
    let second: i64 = fields.next()?.parse().ok()?;
    if hour > 23 || minute > 59 || second > 59 || fraction.len() > 6 {
        return None;
    }
    if !fraction.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<6}").parse().ok()?
    };
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
    seconds.checked_mul(1_000_000)?.checked_add(micros)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Cell, decimal, parse_date, parse_timestamp_micros};

    #[test]
    fn dates_and_timestamps_convert() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2000-03-01"), Some(11_017));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        assert_eq!(parse_date("2023-02-29"), None);
        assert_eq!(parse_date("2024-13-01"), None);
        assert_eq!(
            parse_timestamp_micros("1970-01-01 00:00:01.5"),
            Some(1_500_000)
        );
        assert_eq!(
            parse_timestamp_micros("2024-01-31 12:34:56.789"),
            Some(1_706_704_496_789_000)
        );
        assert_eq!(parse_timestamp_micros("2024-01-31 24:00:00"), None);
    }

    #[test]
    fn decimals_scale_exactly() {
        assert_eq!(decimal(&Cell::from(&json!("123.45")), 10, 2), Ok(12_345));
        assert_eq!(decimal(&Cell::from(&json!("-0.5")), 10, 2), Ok(-50));
        assert_eq!(decimal(&Cell::from(&json!("7")), 10, 2), Ok(700));
        assert_eq!(decimal(&Cell::from(&json!(7)), 10, 0), Ok(7));
        assert!(decimal(&Cell::from(&json!("1.234")), 10, 2).is_err());
        assert!(decimal(&Cell::from(&json!("12345")), 4, 0).is_err());
        assert!(decimal(&Cell::from(&json!("abc")), 10, 2).is_err());
        assert_eq!(
            decimal(
                &Cell::from(&json!("99999999999999999999999999999999999999")),
                38,
                0
            ),
            Ok(99_999_999_999_999_999_999_999_999_999_999_999_999)
        );
    }
}
