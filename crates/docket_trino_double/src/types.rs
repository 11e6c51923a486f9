//! Trino types as the double reports them: the `type` text and `typeSignature` of a
//! result column, and the JSON a value of that type travels as (wide numbers,
//! decimals, dates and timestamps as strings, binary as base64, as Trino does).

use base64::Engine as _;
use rusqlite::types::Value as SqlValue;
use serde_json::{Value, json};

/// The largest `varchar` length, which Trino reports for an unbounded `varchar`.
const UNBOUNDED_VARCHAR_LENGTH: u32 = 2_147_483_647;

/// A Trino type, as far as the double can tell it from a SQLite declared type or a
/// value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrinoType {
    Boolean,
    TinyInt,
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    Decimal {
        precision: u32,
        scale: u32,
    },
    Varchar(Option<u32>),
    Char(u32),
    Varbinary,
    Date,
    Timestamp(u32),
    TimestampWithTimeZone(u32),
    Json,
    Uuid,
    /// `array(element)`, whose values SQLite holds as JSON array text.
    Array(Box<TrinoType>),
    /// The type of a bare `NULL`, and of a computed column the double never saw a
    /// value of.
    Unknown,
}

impl TrinoType {
    /// The Trino type a seeded table declared for a column. Tables are created with
    /// Trino type names as their SQLite declared types, so this mostly reads them
    /// back; SQLite's own names map to their nearest Trino type. An array is
    /// declared `ARRAY element` (SQLite allows no parenthesised type in a declared
    /// type) or written `array(element)`.
    pub(crate) fn from_declared(declared: &str) -> Option<Self> {
        let declared = declared.trim().to_ascii_lowercase();
        if let Some(element) = declared
            .strip_prefix("array(")
            .and_then(|rest| rest.strip_suffix(')'))
            .or_else(|| declared.strip_prefix("array "))
        {
            return Some(Self::Array(Box::new(Self::from_declared(element)?)));
        }
        let (base, arguments) = match declared.split_once('(') {
            Some((base, rest)) => {
                let (inside, after) = rest.split_once(')')?;
                let arguments: Vec<u32> = inside
                    .split(',')
                    .map(|argument| argument.trim().parse().ok())
                    .collect::<Option<_>>()?;
                (format!("{}{}", base.trim(), after), arguments)
            }
            None => (declared, Vec::new()),
        };
        let first = arguments.first().copied();
        Some(match base.trim() {
            "boolean" | "bool" => Self::Boolean,
            "tinyint" => Self::TinyInt,
            "smallint" => Self::SmallInt,
            "integer" | "int" => Self::Integer,
            "bigint" => Self::BigInt,
            "real" | "float" => Self::Real,
            "double" | "double precision" => Self::Double,
            "decimal" | "numeric" => Self::Decimal {
                precision: first.unwrap_or(38),
                scale: arguments.get(1).copied().unwrap_or(0),
            },
            "varchar" | "text" | "string" | "clob" => Self::Varchar(first),
            "char" => Self::Char(first.unwrap_or(1)),
            "varbinary" | "blob" => Self::Varbinary,
            "date" => Self::Date,
            "timestamp" => Self::Timestamp(first.unwrap_or(3)),
            "timestamp with time zone" => Self::TimestampWithTimeZone(first.unwrap_or(3)),
            "json" => Self::Json,
            "uuid" => Self::Uuid,
            _ => return None,
        })
    }

    /// The type of a computed column, from the first non-null value seen in it.
    pub(crate) fn infer(value: &SqlValue) -> Option<Self> {
        match value {
            SqlValue::Null => None,
            SqlValue::Integer(_) => Some(Self::BigInt),
            SqlValue::Real(_) => Some(Self::Double),
            SqlValue::Text(_) => Some(Self::Varchar(None)),
            SqlValue::Blob(_) => Some(Self::Varbinary),
        }
    }

    /// The `type` text of a result column, such as `decimal(12,2)`.
    pub(crate) fn name(&self) -> String {
        match self {
            Self::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            Self::Varchar(Some(length)) => format!("varchar({length})"),
            Self::Char(length) => format!("char({length})"),
            Self::Timestamp(precision) => format!("timestamp({precision})"),
            Self::TimestampWithTimeZone(precision) => {
                format!("timestamp({precision}) with time zone")
            }
            Self::Array(element) => format!("array({})", element.name()),
            other => other.raw_type().to_owned(),
        }
    }

    fn raw_type(&self) -> &'static str {
        match self {
            Self::Boolean => "boolean",
            Self::TinyInt => "tinyint",
            Self::SmallInt => "smallint",
            Self::Integer => "integer",
            Self::BigInt => "bigint",
            Self::Real => "real",
            Self::Double => "double",
            Self::Decimal { .. } => "decimal",
            Self::Varchar(_) => "varchar",
            Self::Char(_) => "char",
            Self::Varbinary => "varbinary",
            Self::Date => "date",
            Self::Timestamp(_) => "timestamp",
            Self::TimestampWithTimeZone(_) => "timestamp with time zone",
            Self::Json => "json",
            Self::Uuid => "uuid",
            Self::Array(_) => "array",
            Self::Unknown => "unknown",
        }
    }

    /// The `typeSignature` object: clients read the length of `varchar`, the
    /// precision and scale of `decimal` and the precision of `timestamp` from its
    /// `arguments`, so the parametric types always carry them.
    pub(crate) fn signature(&self) -> Value {
        let long = |value: u32| json!({ "kind": "LONG", "value": value });
        let arguments = match self {
            Self::Decimal { precision, scale } => vec![long(*precision), long(*scale)],
            Self::Varchar(length) => vec![long(length.unwrap_or(UNBOUNDED_VARCHAR_LENGTH))],
            Self::Char(length) => vec![long(*length)],
            Self::Timestamp(precision) | Self::TimestampWithTimeZone(precision) => {
                vec![long(*precision)]
            }
            Self::Array(element) => vec![json!({ "kind": "TYPE", "value": element.signature() })],
            _ => Vec::new(),
        };
        json!({ "rawType": self.raw_type(), "arguments": arguments })
    }

    /// A result column as Trino describes it.
    pub(crate) fn column(&self, name: &str) -> Value {
        json!({ "name": name, "type": self.name(), "typeSignature": self.signature() })
    }

    /// A value of this type as Trino puts it in `data`.
    pub(crate) fn to_json(&self, value: SqlValue) -> Value {
        match (self, value) {
            (_, SqlValue::Null) => Value::Null,
            (Self::Array(_), SqlValue::Text(text)) => match serde_json::from_str(&text) {
                Ok(Value::Array(elements)) => Value::Array(elements),
                _ => Value::String(text),
            },
            (Self::Boolean, SqlValue::Integer(number)) => Value::Bool(number != 0),
            (Self::Boolean, SqlValue::Text(text)) => match text.as_str() {
                "true" | "TRUE" | "1" => Value::Bool(true),
                "false" | "FALSE" | "0" => Value::Bool(false),
                _ => Value::String(text),
            },
            (Self::Decimal { scale, .. }, SqlValue::Integer(number)) => {
                Value::String(decimal_text(number as f64, *scale))
            }
            (Self::Decimal { scale, .. }, SqlValue::Real(number)) => {
                Value::String(decimal_text(number, *scale))
            }
            (Self::Real | Self::Double, SqlValue::Integer(number)) => float(number as f64),
            (_, SqlValue::Real(number)) if self.is_textual() => Value::String(number.to_string()),
            (_, SqlValue::Real(number)) => float(number),
            (_, SqlValue::Integer(number)) if self.is_textual() => {
                Value::String(number.to_string())
            }
            (_, SqlValue::Integer(number)) => Value::from(number),
            (Self::Varbinary, SqlValue::Text(text)) => {
                Value::String(base64::engine::general_purpose::STANDARD.encode(text.as_bytes()))
            }
            (_, SqlValue::Text(text)) => Value::String(text),
            (_, SqlValue::Blob(bytes)) => {
                Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
    }

    /// Whether values of this type travel as JSON strings.
    fn is_textual(&self) -> bool {
        matches!(
            self,
            Self::Varchar(_)
                | Self::Char(_)
                | Self::Date
                | Self::Timestamp(_)
                | Self::TimestampWithTimeZone(_)
                | Self::Json
                | Self::Uuid
                | Self::Decimal { .. }
        )
    }
}

fn decimal_text(number: f64, scale: u32) -> String {
    format!("{number:.*}", scale as usize)
}

/// Trino sends non-finite doubles as the strings Java prints for them.
fn float(number: f64) -> Value {
    if number.is_nan() {
        Value::from("NaN")
    } else if number.is_infinite() {
        Value::from(if number > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        })
    } else {
        Value::from(number)
    }
}

/// About how many bytes a value takes in a page, for `processedBytes` and for
/// closing a page once it is large.
pub(crate) fn approximate_size(value: &SqlValue) -> u64 {
    match value {
        SqlValue::Null => 4,
        SqlValue::Integer(_) | SqlValue::Real(_) => 8,
        SqlValue::Text(text) => text.len() as u64 + 2,
        SqlValue::Blob(bytes) => bytes.len() as u64 * 4 / 3 + 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_read_back_as_trino_types() {
        assert_eq!(
            TrinoType::from_declared("DECIMAL(12, 2)"),
            Some(TrinoType::Decimal {
                precision: 12,
                scale: 2
            })
        );
        assert_eq!(
            TrinoType::from_declared("VARCHAR(1)"),
            Some(TrinoType::Varchar(Some(1)))
        );
        assert_eq!(
            TrinoType::from_declared("timestamp(3) with time zone"),
            Some(TrinoType::TimestampWithTimeZone(3))
        );
        assert_eq!(TrinoType::from_declared("geometry"), None);
        let array = Some(TrinoType::Array(Box::new(TrinoType::Varchar(None))));
        assert_eq!(TrinoType::from_declared("ARRAY VARCHAR"), array);
        assert_eq!(TrinoType::from_declared("array(varchar)"), array);
        assert_eq!(TrinoType::from_declared("array geometry"), None);
        assert_eq!(
            TrinoType::from_declared("TIMESTAMP WITH TIME ZONE(3)"),
            Some(TrinoType::TimestampWithTimeZone(3))
        );
    }

    #[test]
    fn signatures_carry_the_arguments_clients_read() {
        assert_eq!(
            TrinoType::Varchar(None).signature(),
            json!({"rawType": "varchar", "arguments": [{"kind": "LONG", "value": 2_147_483_647}]})
        );
        assert_eq!(
            TrinoType::Decimal {
                precision: 12,
                scale: 2
            }
            .name(),
            "decimal(12,2)"
        );
        assert_eq!(
            TrinoType::BigInt.signature(),
            json!({"rawType": "bigint", "arguments": []})
        );
        let array = TrinoType::Array(Box::new(TrinoType::Varchar(None)));
        assert_eq!(array.name(), "array(varchar)");
        assert_eq!(
            array.signature(),
            json!({"rawType": "array", "arguments": [{"kind": "TYPE", "value":
                {"rawType": "varchar", "arguments": [{"kind": "LONG", "value": 2_147_483_647}]}}]})
        );
    }

    #[test]
    fn values_travel_as_trino_sends_them() {
        let decimal = TrinoType::Decimal {
            precision: 12,
            scale: 2,
        };
        assert_eq!(decimal.to_json(SqlValue::Integer(100)), json!("100.00"));
        assert_eq!(decimal.to_json(SqlValue::Real(12.5)), json!("12.50"));
        assert_eq!(
            TrinoType::Boolean.to_json(SqlValue::Integer(1)),
            json!(true)
        );
        assert_eq!(TrinoType::Double.to_json(SqlValue::Integer(2)), json!(2.0));
        assert_eq!(
            TrinoType::Double.to_json(SqlValue::Real(f64::NAN)),
            json!("NaN")
        );
        assert_eq!(
            TrinoType::Varbinary.to_json(SqlValue::Blob(vec![1, 2])),
            json!("AQI=")
        );
        let array = TrinoType::Array(Box::new(TrinoType::Varchar(None)));
        assert_eq!(
            array.to_json(SqlValue::Text("[\"global\"]".to_owned())),
            json!(["global"])
        );
    }
}
