//! Trino type names (`decimal(12,2)`, `timestamp(3) with time zone`, `array(varchar)` …)
//! sorted into the few families the writers treat differently.

/// The family of a Trino type, as far as the writers care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TrinoType {
    Boolean,
    TinyInt,
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    /// `decimal(precision, scale)`; Trino sends the value as a string.
    Decimal {
        precision: u8,
        scale: i8,
    },
    /// `varchar`, `varchar(n)`, `char(n)`.
    Text,
    /// `varbinary`, sent as base64.
    Binary,
    /// `date`, sent as `YYYY-MM-DD`.
    Date,
    /// `timestamp(p)` without a time zone, sent as `YYYY-MM-DD HH:MM:SS[.fff…]`.
    Timestamp {
        precision: u8,
    },
    /// Everything else: `time`, zoned timestamps, `json`, `uuid`, intervals, `array`,
    /// `map`, `row`, `unknown` … written as text (JSON text for structured values).
    Other,
}

impl TrinoType {
    /// Sorts a Trino type name; unknown names are [`TrinoType::Other`].
    pub(crate) fn parse(name: &str) -> Self {
        let name = name.trim().to_ascii_lowercase();
        let (base, arguments) = match name.split_once('(') {
            Some((base, rest)) => (base.trim(), rest.split_once(')').map(|(inside, _)| inside)),
            None => (name.as_str(), None),
        };
        let with_time_zone = name.ends_with("with time zone");
        let numbers: Vec<u8> = arguments
            .map(|inside| {
                inside
                    .split(',')
                    .filter_map(|number| number.trim().parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        match base {
            "boolean" => Self::Boolean,
            "tinyint" => Self::TinyInt,
            "smallint" => Self::SmallInt,
            "integer" | "int" => Self::Integer,
            "bigint" => Self::BigInt,
            "real" => Self::Real,
            "double" => Self::Double,
            "decimal" => match numbers.as_slice() {
                // Trino's `decimal` alone is decimal(38, 0).
                [] => Self::Decimal {
                    precision: 38,
                    scale: 0,
                },
                [precision] => Self::Decimal {
                    precision: *precision,
                    scale: 0,
                },
                [precision, scale] => match i8::try_from(*scale) {
                    Ok(scale) => Self::Decimal {
                        precision: *precision,
                        scale,
                    },
                    Err(_) => Self::Other,
                },
                _ => Self::Other,
            },
            "varchar" | "char" => Self::Text,
            "varbinary" => Self::Binary,
            "date" => Self::Date,
            "timestamp" if !with_time_zone => Self::Timestamp {
                // Trino's `timestamp` alone is timestamp(3).
                precision: numbers.first().copied().unwrap_or(3),
            },
            _ => Self::Other,
        }
    }

    /// Whether values of this type are numbers, even when Trino sends them as text
    /// (decimals, and `NaN` / `Infinity` for floating point).
    pub(crate) fn is_numeric(self) -> bool {
        matches!(
            self,
            Self::TinyInt
                | Self::SmallInt
                | Self::Integer
                | Self::BigInt
                | Self::Real
                | Self::Double
                | Self::Decimal { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::TrinoType;

    #[test]
    fn type_names_sort_into_families() {
        let cases = [
            ("boolean", TrinoType::Boolean),
            ("BIGINT", TrinoType::BigInt),
            (
                "decimal(12,2)",
                TrinoType::Decimal {
                    precision: 12,
                    scale: 2,
                },
            ),
            (
                "decimal(38, 10)",
                TrinoType::Decimal {
                    precision: 38,
                    scale: 10,
                },
            ),
            (
                "decimal",
                TrinoType::Decimal {
                    precision: 38,
                    scale: 0,
                },
            ),
            ("varchar", TrinoType::Text),
            ("varchar(25)", TrinoType::Text),
            ("char(3)", TrinoType::Text),
            ("timestamp(6)", TrinoType::Timestamp { precision: 6 }),
            ("timestamp", TrinoType::Timestamp { precision: 3 }),
            ("timestamp(3) with time zone", TrinoType::Other),
            ("array(varchar)", TrinoType::Other),
            ("map(varchar, bigint)", TrinoType::Other),
            ("row(a integer, b varchar)", TrinoType::Other),
            ("json", TrinoType::Other),
        ];
        for (name, expected) in cases {
            assert_eq!(TrinoType::parse(name), expected, "{name}");
        }
    }
}
