//! The double's catalogs: small seeded tables, large synthetic tables, and the
//! `information_schema` views over them, laid out in SQLite.
//!
//! A Trino table `catalog.schema.table` is the SQLite table (or view) named
//! `catalog__schema__table`. Every query gets a fresh in-memory database built from
//! [`seed_sql`], so queries can neither see nor disturb each other, and the seeded
//! data is the same for every test. The synthetic tables are views over a recursive
//! CTE, which SQLite evaluates lazily: `SELECT * FROM synthetic.big.rows_1m` produces
//! its million rows one by one as pages are read, never all at once.
//!
//! `system.runtime.queries` is an empty table here; a query that reads it gets it
//! filled with the double's recorded queries as they stand when it starts (see
//! [`crate::engine`]).

use std::sync::OnceLock;

/// One table the double serves.
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) catalog: &'static str,
    pub(crate) schema: &'static str,
    pub(crate) name: &'static str,
    /// Column names and Trino types, in order.
    pub(crate) columns: &'static [(&'static str, &'static str)],
    source: Source,
}

#[derive(Debug)]
enum Source {
    /// A table created with these columns and filled by this SQL (`{table}` is
    /// replaced by the SQLite name).
    Seeded(&'static str),
    /// A view generating `rows` rows from their row number `n`, with one SQL
    /// expression per column.
    Synthetic {
        rows: u64,
        expressions: &'static [&'static str],
    },
    /// A view of the double's metadata tables, restricted to the table's catalog.
    InformationSchema(&'static str),
    /// `system.runtime.queries`: created empty, filled per query from the double's
    /// recorded queries.
    RuntimeQueries,
}

impl Table {
    /// The SQLite name of the table.
    pub(crate) fn sqlite_name(&self) -> String {
        sqlite_name(self.catalog, self.schema, self.name)
    }
}

/// The SQLite name of `catalog.schema.table`.
pub(crate) fn sqlite_name(catalog: &str, schema: &str, table: &str) -> String {
    format!("{catalog}__{schema}__{table}")
}

const SYNTHETIC_COLUMNS: &[(&str, &str)] = &[
    ("id", "bigint"),
    ("name", "varchar"),
    ("category", "varchar"),
    ("amount", "double"),
];

// The synthetic rows are a pure function of their number: tests can check any row.
const SYNTHETIC_EXPRESSIONS: &[&str] = &[
    "n",
    "'row-' || n",
    "'category-' || (n % 7)",
    "(n % 1000) * 1.25",
];

const INFORMATION_SCHEMA_SCHEMATA: &[(&str, &str)] =
    &[("catalog_name", "varchar"), ("schema_name", "varchar")];
const INFORMATION_SCHEMA_TABLES: &[(&str, &str)] = &[
    ("table_catalog", "varchar"),
    ("table_schema", "varchar"),
    ("table_name", "varchar"),
    ("table_type", "varchar"),
];
const INFORMATION_SCHEMA_COLUMNS: &[(&str, &str)] = &[
    ("table_catalog", "varchar"),
    ("table_schema", "varchar"),
    ("table_name", "varchar"),
    ("column_name", "varchar"),
    ("ordinal_position", "bigint"),
    ("column_default", "varchar"),
    ("is_nullable", "varchar"),
    ("data_type", "varchar"),
];

/// Trino's `system.runtime.queries` (`io.trino.connector.system.QuerySystemTable`),
/// column for column.
pub(crate) const RUNTIME_QUERIES_COLUMNS: &[(&str, &str)] = &[
    ("query_id", "varchar"),
    ("state", "varchar"),
    ("user", "varchar"),
    ("source", "varchar"),
    ("query", "varchar"),
    ("resource_group_id", "array(varchar)"),
    ("queued_time_ms", "bigint"),
    ("analysis_time_ms", "bigint"),
    ("planning_time_ms", "bigint"),
    ("created", "timestamp(3) with time zone"),
    ("started", "timestamp(3) with time zone"),
    ("last_heartbeat", "timestamp(3) with time zone"),
    ("end", "timestamp(3) with time zone"),
    ("error_type", "varchar"),
    ("error_code", "varchar"),
];

/// The catalogs, in the order `SHOW CATALOGS` sorts them anyway.
pub(crate) const CATALOGS: &[&str] = &["memory", "synthetic", "system", "tpch"];

/// Every table, including each catalog's `information_schema`.
pub(crate) fn tables() -> &'static [Table] {
    static TABLES: OnceLock<Vec<Table>> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut tables = vec![
            Table {
                catalog: "memory",
                schema: "default",
                name: "customers",
                columns: &[
                    ("custkey", "bigint"),
                    ("name", "varchar"),
                    ("email", "varchar"),
                    ("country", "varchar(2)"),
                    ("created_at", "timestamp(3)"),
                    ("active", "boolean"),
                ],
                source: Source::Seeded(
                    "INSERT INTO {table} VALUES
                     (1, 'Ada Lovelace', 'ada@example.com', 'GB', '2024-01-05 09:30:00.000', 1),
                     (2, 'Grace Hopper', 'grace@example.com', 'US', '2024-02-11 14:00:00.000', 1),
                     (3, 'Edsger Dijkstra', 'edsger@example.com', 'NL', '2024-03-20 08:15:00.000', 0),
                     (4, 'Barbara Liskov', 'barbara@example.com', 'US', '2024-04-02 17:45:00.000', 1),
                     (5, 'Niklaus Wirth', 'niklaus@example.com', 'CH', '2024-05-14 11:05:00.000', 1),
                     (6, 'Frances Allen', NULL, 'US', '2024-06-30 16:20:00.000', 0)",
                ),
            },
            Table {
                catalog: "memory",
                schema: "default",
                name: "orders",
                columns: &[
                    ("orderkey", "bigint"),
                    ("custkey", "bigint"),
                    ("orderstatus", "varchar(1)"),
                    ("totalprice", "decimal(12,2)"),
                    ("orderdate", "date"),
                    ("comment", "varchar"),
                ],
                // Fifty orders spread over the customers, statuses and 2024.
                source: Source::Seeded(
                    "INSERT INTO {table}
                     WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 50)
                     SELECT n, (n % 6) + 1, substr('OFP', (n % 3) + 1, 1),
                            round(n * 37.25 + (n % 4) * 0.5, 2),
                            date('2024-01-01', '+' || (n * 7) || ' days'),
                            'order ' || n
                     FROM seq",
                ),
            },
            Table {
                catalog: "tpch",
                schema: "tiny",
                name: "region",
                columns: &[
                    ("regionkey", "bigint"),
                    ("name", "varchar(25)"),
                    ("comment", "varchar(152)"),
                ],
                source: Source::Seeded(
                    "INSERT INTO {table} VALUES
                     (0, 'AFRICA', 'lar deposits'), (1, 'AMERICA', 'hs use ironic requests'),
                     (2, 'ASIA', 'ges thrash furiously'), (3, 'EUROPE', 'ly final courts'),
                     (4, 'MIDDLE EAST', 'uickly special accounts')",
                ),
            },
            Table {
                catalog: "tpch",
                schema: "tiny",
                name: "nation",
                columns: &[
                    ("nationkey", "bigint"),
                    ("name", "varchar(25)"),
                    ("regionkey", "bigint"),
                    ("comment", "varchar(152)"),
                ],
                source: Source::Seeded(
                    "INSERT INTO {table} VALUES
                     (0, 'ALGERIA', 0, 'haggle'), (1, 'ARGENTINA', 1, 'al foxes'),
                     (2, 'BRAZIL', 1, 'y alongside'), (3, 'CANADA', 1, 'eas hang'),
                     (4, 'EGYPT', 4, 'y above'), (5, 'ETHIOPIA', 0, 'ven packages'),
                     (6, 'FRANCE', 3, 'refully final'), (7, 'GERMANY', 3, 'l platelets'),
                     (8, 'INDIA', 2, 'ss excuses'), (9, 'INDONESIA', 2, 'slyly express'),
                     (10, 'IRAN', 4, 'efully alongside'), (11, 'IRAQ', 4, 'nic deposits'),
                     (12, 'JAPAN', 2, 'ously'), (13, 'JORDAN', 4, 'ic deposits'),
                     (14, 'KENYA', 0, 'pending excuses'), (15, 'MOROCCO', 0, 'rns'),
                     (16, 'MOZAMBIQUE', 0, 's'), (17, 'PERU', 1, 'platelets'),
                     (18, 'CHINA', 2, 'c dependencies'), (19, 'ROMANIA', 3, 'ular asymptotes'),
                     (20, 'SAUDI ARABIA', 4, 'ts'), (21, 'VIETNAM', 2, 'hely enticingly'),
                     (22, 'RUSSIA', 3, 'requests'), (23, 'UNITED KINGDOM', 3, 'eans boost'),
                     (24, 'UNITED STATES', 1, 'y final packages')",
                ),
            },
        ];
        tables.push(Table {
            catalog: "system",
            schema: "runtime",
            name: "queries",
            columns: RUNTIME_QUERIES_COLUMNS,
            source: Source::RuntimeQueries,
        });
        for (name, rows) in [
            ("rows_1k", 1_000),
            ("rows_100k", 100_000),
            ("rows_1m", 1_000_000),
            ("rows_10m", 10_000_000),
        ] {
            tables.push(Table {
                catalog: "synthetic",
                schema: "big",
                name,
                columns: SYNTHETIC_COLUMNS,
                source: Source::Synthetic {
                    rows,
                    expressions: SYNTHETIC_EXPRESSIONS,
                },
            });
        }
        for catalog in CATALOGS {
            for (name, columns, metadata) in [
                ("schemata", INFORMATION_SCHEMA_SCHEMATA, "_docket_schemata"),
                ("tables", INFORMATION_SCHEMA_TABLES, "_docket_tables"),
                ("columns", INFORMATION_SCHEMA_COLUMNS, "_docket_columns"),
            ] {
                tables.push(Table {
                    catalog,
                    schema: "information_schema",
                    name,
                    columns,
                    source: Source::InformationSchema(metadata),
                });
            }
        }
        tables
    })
}

/// The table `catalog.schema.name`, if the double has it.
pub(crate) fn find_table(catalog: &str, schema: &str, name: &str) -> Option<&'static Table> {
    tables()
        .iter()
        .find(|table| table.catalog == catalog && table.schema == schema && table.name == name)
}

/// Whether `catalog` exists.
pub(crate) fn has_catalog(catalog: &str) -> bool {
    CATALOGS.contains(&catalog)
}

/// Whether `catalog.schema` exists.
pub(crate) fn has_schema(catalog: &str, schema: &str) -> bool {
    tables()
        .iter()
        .any(|table| table.catalog == catalog && table.schema == schema)
}

/// The tables of `catalog.schema`.
pub(crate) fn tables_in(catalog: &str, schema: &str) -> impl Iterator<Item = &'static Table> {
    let catalog = catalog.to_owned();
    let schema = schema.to_owned();
    tables()
        .iter()
        .filter(move |table| table.catalog == catalog && table.schema == schema)
}

/// The SQL that builds a query's database: every table and view, and the metadata
/// the `information_schema` views and `SHOW` statements read.
pub(crate) fn seed_sql() -> &'static str {
    static SEED: OnceLock<String> = OnceLock::new();
    SEED.get_or_init(|| {
        let mut sql = String::from(
            "CREATE TABLE _docket_catalogs (catalog_name VARCHAR);
             CREATE TABLE _docket_schemata (catalog_name VARCHAR, schema_name VARCHAR);
             CREATE TABLE _docket_tables (table_catalog VARCHAR, table_schema VARCHAR,
                 table_name VARCHAR, table_type VARCHAR);
             CREATE TABLE _docket_columns (table_catalog VARCHAR, table_schema VARCHAR,
                 table_name VARCHAR, column_name VARCHAR, ordinal_position BIGINT,
                 column_default VARCHAR, is_nullable VARCHAR, data_type VARCHAR);\n",
        );
        for catalog in CATALOGS {
            sql.push_str(&format!(
                "INSERT INTO _docket_catalogs VALUES ({});\n",
                quote_literal(catalog)
            ));
        }
        let mut schemata: Vec<(&str, &str)> = tables()
            .iter()
            .map(|table| (table.catalog, table.schema))
            .collect();
        schemata.dedup();
        schemata.sort_unstable();
        schemata.dedup();
        for (catalog, schema) in schemata {
            sql.push_str(&format!(
                "INSERT INTO _docket_schemata VALUES ({}, {});\n",
                quote_literal(catalog),
                quote_literal(schema)
            ));
        }
        for table in tables() {
            let name = table.sqlite_name();
            match &table.source {
                Source::Seeded(_) | Source::RuntimeQueries => {
                    let columns: Vec<String> = table
                        .columns
                        .iter()
                        // The Trino type is the declared type, which is how result
                        // columns get their Trino types back.
                        .map(|(column, kind)| format!("\"{column}\" {}", sqlite_declared_type(kind)))
                        .collect();
                    sql.push_str(&format!(
                        "CREATE TABLE \"{name}\" ({});\n",
                        columns.join(", ")
                    ));
                    if let Source::Seeded(fill) = &table.source {
                        sql.push_str(&format!(
                            "{};\n",
                            fill.replace("{table}", &format!("\"{name}\""))
                        ));
                    }
                }
                Source::Synthetic { rows, expressions } => {
                    let columns: Vec<String> = table
                        .columns
                        .iter()
                        .zip(expressions.iter())
                        .map(|((column, _), expression)| format!("{expression} AS \"{column}\""))
                        .collect();
                    sql.push_str(&format!(
                        "CREATE VIEW \"{name}\" AS WITH RECURSIVE seq(n) AS \
                         (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {rows}) \
                         SELECT {} FROM seq;\n",
                        columns.join(", ")
                    ));
                }
                Source::InformationSchema(metadata) => {
                    let catalog_column = if *metadata == "_docket_schemata" {
                        "catalog_name"
                    } else {
                        "table_catalog"
                    };
                    let columns: Vec<&str> =
                        table.columns.iter().map(|(column, _)| *column).collect();
                    sql.push_str(&format!(
                        "CREATE VIEW \"{name}\" AS SELECT {} FROM {metadata} WHERE {catalog_column} = {};\n",
                        columns.join(", "),
                        quote_literal(table.catalog)
                    ));
                }
            }
            let table_type = match table.source {
                Source::Seeded(_) | Source::RuntimeQueries => "BASE TABLE",
                Source::Synthetic { .. } | Source::InformationSchema(_) => "VIEW",
            };
            sql.push_str(&format!(
                "INSERT INTO _docket_tables VALUES ({}, {}, {}, '{table_type}');\n",
                quote_literal(table.catalog),
                quote_literal(table.schema),
                quote_literal(table.name)
            ));
            for (position, (column, kind)) in table.columns.iter().enumerate() {
                sql.push_str(&format!(
                    "INSERT INTO _docket_columns VALUES ({}, {}, {}, {}, {}, NULL, 'YES', {});\n",
                    quote_literal(table.catalog),
                    quote_literal(table.schema),
                    quote_literal(table.name),
                    quote_literal(column),
                    position + 1,
                    quote_literal(kind)
                ));
            }
        }
        sql
    })
}

/// A Trino type as a SQLite declared type that [`crate::types::TrinoType::from_declared`]
/// reads back. SQLite allows parenthesised numbers only at the end of a declared
/// type and no nested type, so `timestamp(3) with time zone` is declared
/// `TIMESTAMP WITH TIME ZONE(3)` and `array(varchar)` is declared `ARRAY VARCHAR`.
fn sqlite_declared_type(kind: &str) -> String {
    if let Some(element) = kind
        .strip_prefix("array(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        return format!("ARRAY {}", sqlite_declared_type(element));
    }
    if let Some(rest) = kind.strip_prefix("timestamp(")
        && let Some((precision, " with time zone")) = rest.split_once(')')
    {
        return format!("TIMESTAMP WITH TIME ZONE({precision})");
    }
    kind.to_uppercase()
}

/// Whether `table` is `system.runtime.queries`, which a query reading it gets
/// filled with the recorded queries.
pub(crate) fn is_runtime_queries(table: &Table) -> bool {
    matches!(table.source, Source::RuntimeQueries)
}

/// `text` as a SQL string literal.
pub(crate) fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The number of rows a synthetic table generates, for the plan's estimate.
pub(crate) fn synthetic_rows(table: &Table) -> Option<u64> {
    match table.source {
        Source::Synthetic { rows, .. } => Some(rows),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TrinoType;

    #[test]
    fn every_column_type_is_declared_so_that_it_reads_back() {
        for table in tables() {
            for (column, kind) in table.columns {
                let declared = sqlite_declared_type(kind);
                let read_back = TrinoType::from_declared(&declared).map(|kind| kind.name());
                assert_eq!(
                    read_back.as_deref(),
                    Some(*kind),
                    "{}.{}.{}.{column} declared {declared}",
                    table.catalog,
                    table.schema,
                    table.name
                );
            }
        }
    }

    #[test]
    fn the_seed_builds_a_database() {
        let connection = rusqlite::Connection::open_in_memory().expect("a database");
        connection.execute_batch(seed_sql()).expect("the seed runs");
        let queries: i64 = connection
            .query_row(
                "SELECT count(*) FROM \"system__runtime__queries\"",
                [],
                |row| row.get(0),
            )
            .expect("the table exists");
        assert_eq!(queries, 0);
    }
}
