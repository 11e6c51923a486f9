//! The double's SQL front end: a small lexer, the Trino statements SQLite has no
//! notion of (`SHOW …`, `DESCRIBE`, `EXPLAIN`), and the rewrite of Trino's
//! `catalog.schema.table` names into the SQLite names of [`crate::catalog`].
//!
//! Everything else is SQLite's: a `SELECT`, `WITH` or `VALUES` is handed to it with
//! only the table names rewritten, and its errors are mapped back to Trino's error
//! names with positions in the text the client sent.

use crate::catalog::{self, quote_literal};
use crate::failure::Failure;

/// The session a statement runs in (from `X-Trino-Catalog` and `X-Trino-Schema`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    pub(crate) catalog: Option<String>,
    pub(crate) schema: Option<String>,
}

/// What a statement turns into.
#[derive(Debug)]
pub(crate) enum Plan {
    /// SQL for SQLite whose rows are the result.
    Rows(RowsPlan),
    /// `EXPLAIN`: the plan of a query, or with `TYPE VALIDATE` just whether it is valid.
    Explain { query: RowsPlan, validate: bool },
}

/// SQL for SQLite, with what is needed to report its errors against the original.
#[derive(Debug)]
pub(crate) struct RowsPlan {
    pub(crate) sql: String,
    /// `(offset in sql, offset in the original)` at the start of each copied run.
    offsets: Vec<(usize, usize)>,
    /// The text the client sent, for error positions.
    original: String,
    /// Whether result column names follow Trino's rules for user queries
    /// (lower case, `_colN` for expressions) or are exactly as generated.
    pub(crate) trino_column_names: bool,
    /// Whether the statement is a `VALUES`, whose columns Trino names `_colN`.
    pub(crate) values: bool,
    /// The tables the statement reads, for estimates.
    pub(crate) tables: Vec<&'static catalog::Table>,
    /// `catalog.schema.` of the session, to name unknown tables in full.
    pub(crate) session_prefix: String,
}

impl RowsPlan {
    /// The `(line, column)` in the original text of a byte offset into [`Self::sql`],
    /// when that offset comes from the client's text.
    pub(crate) fn original_position(&self, sql_offset: usize) -> Option<(u32, u32)> {
        let (rewritten, original) = self
            .offsets
            .iter()
            .rev()
            .find(|(rewritten, _)| *rewritten <= sql_offset)?;
        Some(position(
            &self.original,
            original + (sql_offset - rewritten),
        ))
    }

    /// The position just after the end of the original text.
    pub(crate) fn end_position(&self) -> (u32, u32) {
        position(&self.original, self.original.len())
    }

    /// The position of the first token of the original text equal to `word`, case
    /// insensitively (to place errors SQLite reports by name).
    pub(crate) fn position_of(&self, word: &str) -> Option<(u32, u32)> {
        let tokens = lex(&self.original).ok()?;
        let word = word.to_lowercase();
        tokens
            .iter()
            .find(|token| {
                token.identifier(&self.original).as_deref() == Some(word.as_str())
                    || token.text(&self.original).eq_ignore_ascii_case(&word)
            })
            .map(|token| position(&self.original, token.start))
    }
}

/// `(line, column)`, both from 1, of a byte offset, as Trino reports positions.
pub(crate) fn position(text: &str, offset: usize) -> (u32, u32) {
    let before = &text[..floor_char_boundary(text, offset.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Word,
    QuotedIdentifier,
    String,
    Number,
    Symbol,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

impl Token {
    fn text<'a>(&self, source: &'a str) -> &'a str {
        &source[self.start..self.end]
    }

    /// The identifier this token names, lower-cased as Trino folds identifiers.
    fn identifier(&self, source: &str) -> Option<String> {
        match self.kind {
            Kind::Word => Some(self.text(source).to_lowercase()),
            Kind::QuotedIdentifier => {
                let inner = &source[self.start + 1..self.end - 1];
                Some(inner.replace("\"\"", "\"").to_lowercase())
            }
            _ => None,
        }
    }

    fn is_keyword(&self, source: &str, keyword: &str) -> bool {
        self.kind == Kind::Word && self.text(source).eq_ignore_ascii_case(keyword)
    }

    fn is_symbol(&self, source: &str, symbol: &str) -> bool {
        self.kind == Kind::Symbol && self.text(source) == symbol
    }
}

fn syntax_error(source: &str, offset: usize, message: &str) -> Failure {
    Failure::syntax(position(source, offset), message)
}

fn lex(source: &str) -> Result<Vec<Token>, Failure> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let start = index;
        let byte = bytes[index];
        if byte.is_ascii_whitespace() {
            index += 1;
            continue;
        }
        if source[index..].starts_with("--") {
            index = source[index..]
                .find('\n')
                .map_or(bytes.len(), |end| index + end);
            continue;
        }
        if source[index..].starts_with("/*") {
            let end = source[index + 2..]
                .find("*/")
                .ok_or_else(|| syntax_error(source, start, "unterminated comment"))?;
            index += end + 4;
            continue;
        }
        let kind = match byte {
            b'\'' | b'"' => {
                let quote = byte;
                index += 1;
                loop {
                    match bytes.get(index) {
                        None => {
                            return Err(syntax_error(
                                source,
                                start,
                                "token recognition error: unterminated quoted text",
                            ));
                        }
                        Some(&next) if next == quote => {
                            if bytes.get(index + 1) == Some(&quote) {
                                index += 2;
                            } else {
                                index += 1;
                                break;
                            }
                        }
                        Some(_) => index += 1,
                    }
                }
                if quote == b'\'' {
                    Kind::String
                } else {
                    Kind::QuotedIdentifier
                }
            }
            b'0'..=b'9' => {
                while index < bytes.len()
                    && (bytes[index].is_ascii_alphanumeric() || bytes[index] == b'.')
                {
                    index += 1;
                }
                Kind::Number
            }
            _ if byte == b'_' || byte.is_ascii_alphabetic() || byte >= 0x80 => {
                while index < bytes.len()
                    && (bytes[index] == b'_'
                        || bytes[index].is_ascii_alphanumeric()
                        || bytes[index] >= 0x80)
                {
                    index += 1;
                }
                Kind::Word
            }
            _ => {
                index += 1;
                Kind::Symbol
            }
        };
        tokens.push(Token {
            kind,
            start,
            end: index,
        });
    }
    Ok(tokens)
}

/// Plans one statement.
///
/// # Errors
///
/// A [`Failure`] as Trino would report it: a syntax error, an unknown catalog,
/// schema or table, or a statement the double does not run.
pub(crate) fn plan(source: &str, session: &Session) -> Result<Plan, Failure> {
    let tokens = lex(source)?;
    // Trino takes exactly one statement and no terminating semicolon.
    if let Some(semicolon) = tokens.iter().find(|token| token.is_symbol(source, ";")) {
        return Err(syntax_error(
            source,
            semicolon.start,
            "mismatched input ';'. Expecting: <EOF>",
        ));
    }
    let Some(first) = tokens.first() else {
        return Err(syntax_error(
            source,
            source.len(),
            "mismatched input '<EOF>'. Expecting: 'SELECT', 'WITH', 'VALUES', 'SHOW', 'DESCRIBE', 'EXPLAIN'",
        ));
    };
    if first.is_keyword(source, "explain") {
        return plan_explain(source, &tokens, session);
    }
    plan_rows(source, &tokens, session).map(Plan::Rows)
}

fn plan_rows(source: &str, tokens: &[Token], session: &Session) -> Result<RowsPlan, Failure> {
    let Some(first) = tokens.first() else {
        return Err(syntax_error(
            source,
            source.len(),
            "mismatched input '<EOF>'",
        ));
    };
    let keyword = first.text(source).to_ascii_lowercase();
    match keyword.as_str() {
        "select" | "with" | "values" | "(" => rewrite_query(source, tokens, session),
        "show" => plan_show(source, tokens, session),
        "describe" => {
            let (name, _) = qualified_name(source, &tokens[1..]).ok_or_else(|| {
                syntax_error(
                    source,
                    tokens.get(1).map_or(source.len(), |token| token.start),
                    "mismatched input. Expecting: <identifier>",
                )
            })?;
            describe(source, &name, first.start, session, None)
        }
        _ => Err(Failure::not_supported(
            position(source, first.start),
            &format!(
                "the Trino double only runs read statements (SELECT, WITH, VALUES, SHOW, \
                 DESCRIBE, EXPLAIN), not {}",
                keyword.to_uppercase()
            ),
        )),
    }
}

fn plan_explain(source: &str, tokens: &[Token], session: &Session) -> Result<Plan, Failure> {
    let mut index = 1;
    let mut validate = false;
    if tokens
        .get(index)
        .is_some_and(|token| token.is_keyword(source, "analyze"))
    {
        return Err(Failure::not_supported(
            position(source, tokens[index].start),
            "the Trino double does not run EXPLAIN ANALYZE",
        ));
    }
    if tokens
        .get(index)
        .is_some_and(|token| token.is_symbol(source, "("))
    {
        index += 1;
        loop {
            let Some(token) = tokens.get(index) else {
                return Err(syntax_error(
                    source,
                    source.len(),
                    "mismatched input '<EOF>'",
                ));
            };
            if token.is_symbol(source, ")") {
                index += 1;
                break;
            }
            if token.is_keyword(source, "type")
                && tokens
                    .get(index + 1)
                    .is_some_and(|value| value.is_keyword(source, "validate"))
            {
                validate = true;
            }
            index += 1;
        }
    }
    let query = plan_rows(source, &tokens[index..], session)?;
    Ok(Plan::Explain { query, validate })
}

/// A dotted name of one to three parts starting at `tokens[0]`, with the number of
/// tokens it spans.
fn qualified_name(source: &str, tokens: &[Token]) -> Option<(Vec<String>, usize)> {
    let mut parts = vec![tokens.first()?.identifier(source)?];
    let mut used = 1;
    while parts.len() < 3
        && tokens
            .get(used)
            .is_some_and(|token| token.is_symbol(source, "."))
    {
        let Some(part) = tokens
            .get(used + 1)
            .and_then(|token| token.identifier(source))
        else {
            break;
        };
        parts.push(part);
        used += 2;
    }
    Some((parts, used))
}

/// `LIKE 'pattern'` at `tokens[index]`, as a SQL condition on `column`.
fn like_filter(
    source: &str,
    tokens: &[Token],
    index: usize,
    column: &str,
) -> Result<String, Failure> {
    match tokens.get(index) {
        None => Ok(String::new()),
        Some(token) if token.is_keyword(source, "like") => match tokens.get(index + 1) {
            Some(pattern) if pattern.kind == Kind::String => {
                Ok(format!(" AND {column} LIKE {}", pattern.text(source)))
            }
            _ => Err(syntax_error(
                source,
                token.end,
                "mismatched input. Expecting: <string>",
            )),
        },
        Some(token) => Err(syntax_error(
            source,
            token.start,
            &format!(
                "mismatched input '{}'. Expecting: 'LIKE', <EOF>",
                token.text(source)
            ),
        )),
    }
}

fn session_catalog(source: &str, session: &Session, at: usize) -> Result<String, Failure> {
    session.catalog.clone().ok_or_else(|| {
        Failure::user(
            "MISSING_CATALOG_NAME",
            56,
            Some(position(source, at)),
            "Catalog must be specified when session catalog is not set",
        )
    })
}

fn require_catalog(source: &str, catalog: &str, at: usize) -> Result<(), Failure> {
    if catalog::has_catalog(catalog) {
        Ok(())
    } else {
        Err(Failure::user(
            "CATALOG_NOT_FOUND",
            44,
            Some(position(source, at)),
            &format!("Catalog '{catalog}' not found"),
        ))
    }
}

fn require_schema(source: &str, catalog: &str, schema: &str, at: usize) -> Result<(), Failure> {
    require_catalog(source, catalog, at)?;
    if catalog::has_schema(catalog, schema) {
        Ok(())
    } else {
        Err(Failure::user(
            "SCHEMA_NOT_FOUND",
            45,
            Some(position(source, at)),
            &format!("Schema '{schema}' does not exist"),
        ))
    }
}

fn generated(source: &str, sql: String, tables: Vec<&'static catalog::Table>) -> RowsPlan {
    RowsPlan {
        sql,
        offsets: Vec::new(),
        original: source.to_owned(),
        trino_column_names: false,
        values: false,
        tables,
        session_prefix: String::new(),
    }
}

fn plan_show(source: &str, tokens: &[Token], session: &Session) -> Result<RowsPlan, Failure> {
    let show = tokens[0].start;
    let what = tokens
        .get(1)
        .map(|token| token.text(source).to_ascii_lowercase());
    match what.as_deref() {
        Some("catalogs") => {
            let filter = like_filter(source, tokens, 2, "catalog_name")?;
            Ok(generated(
                source,
                format!(
                    "SELECT catalog_name AS \"Catalog\" FROM _docket_catalogs WHERE 1 = 1{filter} ORDER BY 1"
                ),
                Vec::new(),
            ))
        }
        Some("schemas") => {
            let (catalog, next) = match tokens.get(2) {
                Some(token)
                    if token.is_keyword(source, "from") || token.is_keyword(source, "in") =>
                {
                    let (name, used) = qualified_name(source, &tokens[3..])
                        .filter(|(name, _)| name.len() == 1)
                        .ok_or_else(|| {
                            syntax_error(
                                source,
                                token.end,
                                "mismatched input. Expecting: <identifier>",
                            )
                        })?;
                    (name[0].clone(), 3 + used)
                }
                _ => (session_catalog(source, session, show)?, 2),
            };
            require_catalog(source, &catalog, show)?;
            let filter = like_filter(source, tokens, next, "schema_name")?;
            Ok(generated(
                source,
                format!(
                    "SELECT schema_name AS \"Schema\" FROM _docket_schemata WHERE catalog_name = {}{filter} ORDER BY 1",
                    quote_literal(&catalog)
                ),
                Vec::new(),
            ))
        }
        Some("tables") => {
            let ((catalog, schema), next) = match tokens.get(2) {
                Some(token)
                    if token.is_keyword(source, "from") || token.is_keyword(source, "in") =>
                {
                    let (name, used) = qualified_name(source, &tokens[3..])
                        .filter(|(name, _)| name.len() <= 2)
                        .ok_or_else(|| {
                            syntax_error(
                                source,
                                token.end,
                                "mismatched input. Expecting: <identifier>",
                            )
                        })?;
                    let resolved = match name.as_slice() {
                        [catalog, schema, ..] => (catalog.clone(), schema.clone()),
                        [schema] => (session_catalog(source, session, show)?, schema.clone()),
                        [] => (session_catalog(source, session, show)?, String::new()),
                    };
                    (resolved, 3 + used)
                }
                _ => {
                    let catalog = session_catalog(source, session, show)?;
                    let schema = session.schema.clone().ok_or_else(|| {
                        Failure::user(
                            "MISSING_SCHEMA_NAME",
                            57,
                            Some(position(source, show)),
                            "Schema must be specified when session schema is not set",
                        )
                    })?;
                    ((catalog, schema), 2)
                }
            };
            require_schema(source, &catalog, &schema, show)?;
            let filter = like_filter(source, tokens, next, "table_name")?;
            Ok(generated(
                source,
                format!(
                    "SELECT table_name AS \"Table\" FROM _docket_tables WHERE table_catalog = {} \
                     AND table_schema = {}{filter} ORDER BY 1",
                    quote_literal(&catalog),
                    quote_literal(&schema)
                ),
                Vec::new(),
            ))
        }
        Some("columns") => {
            let Some(from) = tokens
                .get(2)
                .filter(|token| token.is_keyword(source, "from") || token.is_keyword(source, "in"))
            else {
                return Err(syntax_error(
                    source,
                    tokens.get(2).map_or(source.len(), |token| token.start),
                    "mismatched input. Expecting: 'FROM', 'IN'",
                ));
            };
            let (name, used) = qualified_name(source, &tokens[3..]).ok_or_else(|| {
                syntax_error(
                    source,
                    from.end,
                    "mismatched input. Expecting: <identifier>",
                )
            })?;
            let filter = like_filter(source, tokens, 3 + used, "column_name")?;
            describe(source, &name, show, session, Some(filter))
        }
        _ => Err(Failure::not_supported(
            position(source, show),
            &format!(
                "the Trino double supports SHOW CATALOGS, SCHEMAS, TABLES and COLUMNS, not SHOW {}",
                what.unwrap_or_default().to_uppercase()
            ),
        )),
    }
}

/// `catalog.schema.table` for a name of one to three parts in `session`.
fn resolve_table(
    source: &str,
    name: &[String],
    at: usize,
    session: &Session,
) -> Result<(String, String, String), Failure> {
    let missing_schema = || {
        Failure::user(
            "MISSING_SCHEMA_NAME",
            57,
            Some(position(source, at)),
            "Schema must be specified when session schema is not set",
        )
    };
    Ok(match name {
        [] => return Err(missing_schema()),
        [table] => (
            session_catalog(source, session, at)?,
            session.schema.clone().ok_or_else(missing_schema)?,
            table.clone(),
        ),
        [schema, table] => (
            session_catalog(source, session, at)?,
            schema.clone(),
            table.clone(),
        ),
        [catalog, schema, table, ..] => (catalog.clone(), schema.clone(), table.clone()),
    })
}

fn table_not_found(source: &str, at: usize, catalog: &str, schema: &str, table: &str) -> Failure {
    Failure::user(
        "TABLE_NOT_FOUND",
        46,
        Some(position(source, at)),
        &format!("Table '{catalog}.{schema}.{table}' does not exist"),
    )
}

fn describe(
    source: &str,
    name: &[String],
    at: usize,
    session: &Session,
    filter: Option<String>,
) -> Result<RowsPlan, Failure> {
    let (catalog, schema, table) = resolve_table(source, name, at, session)?;
    require_schema(source, &catalog, &schema, at)?;
    let Some(found) = catalog::find_table(&catalog, &schema, &table) else {
        return Err(table_not_found(source, at, &catalog, &schema, &table));
    };
    Ok(generated(
        source,
        format!(
            "SELECT column_name AS \"Column\", data_type AS \"Type\", '' AS \"Extra\", \
             '' AS \"Comment\" FROM _docket_columns WHERE table_catalog = {} AND table_schema = {} \
             AND table_name = {}{} ORDER BY ordinal_position",
            quote_literal(&catalog),
            quote_literal(&schema),
            quote_literal(&table),
            filter.unwrap_or_default()
        ),
        vec![found],
    ))
}

/// Copies a query for SQLite, replacing every Trino table name by its SQLite name.
fn rewrite_query(source: &str, tokens: &[Token], session: &Session) -> Result<RowsPlan, Failure> {
    let begin = tokens.first().map_or(0, |token| token.start);
    let mut sql = String::with_capacity(source.len() + 32);
    let mut offsets = vec![(0, begin)];
    let mut copied_to = begin;
    let mut tables = Vec::new();
    let mut index = 0;
    while index < tokens.len() {
        let token = tokens[index];
        let after_dot = index > 0 && tokens[index - 1].is_symbol(source, ".");
        let in_from = index > 0
            && (tokens[index - 1].is_keyword(source, "from")
                || tokens[index - 1].is_keyword(source, "join"));
        let name = if after_dot {
            None
        } else {
            qualified_name(source, &tokens[index..])
        };
        let Some((parts, used)) = name else {
            index += 1;
            continue;
        };
        let end = tokens[index + used - 1].end;
        let resolved = match parts.as_slice() {
            [catalog, schema, table] => Some((catalog.clone(), schema.clone(), table.clone())),
            [schema, table] => session
                .catalog
                .clone()
                .map(|catalog| (catalog, schema.clone(), table.clone())),
            _ => None,
        };
        let found = resolved
            .as_ref()
            .and_then(|(catalog, schema, table)| catalog::find_table(catalog, schema, table));
        match (found, resolved) {
            (Some(table), _) => {
                sql.push_str(&source[copied_to..token.start]);
                offsets.push((sql.len(), token.start));
                sql.push_str(&format!("\"{}\"", table.sqlite_name()));
                copied_to = end;
                offsets.push((sql.len(), end));
                tables.push(table);
            }
            // In a FROM, a dotted name that is no table is an error in Trino; to
            // SQLite a three-part name is only a syntax error.
            (None, Some((catalog, schema, table))) if in_from => {
                require_schema(source, &catalog, &schema, token.start)?;
                return Err(table_not_found(
                    source,
                    token.start,
                    &catalog,
                    &schema,
                    &table,
                ));
            }
            (None, _) => {
                if parts.len() == 1
                    && in_from
                    && let (Some(catalog), Some(schema)) = (&session.catalog, &session.schema)
                    && let Some(table) = catalog::find_table(catalog, schema, &parts[0])
                {
                    // Resolved by the session's temporary views at run time.
                    tables.push(table);
                }
            }
        }
        index += used;
    }
    sql.push_str(&source[copied_to..]);
    let values = tokens
        .first()
        .is_some_and(|token| token.is_keyword(source, "values"));
    Ok(RowsPlan {
        sql,
        offsets,
        original: source.to_owned(),
        trino_column_names: true,
        values,
        tables,
        session_prefix: match (&session.catalog, &session.schema) {
            (Some(catalog), Some(schema)) => format!("{catalog}.{schema}."),
            _ => String::new(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session {
            catalog: Some("memory".to_owned()),
            schema: Some("default".to_owned()),
        }
    }

    fn rows(sql: &str) -> RowsPlan {
        match plan(sql, &session()) {
            Ok(Plan::Rows(rows)) => rows,
            other => panic!("expected rows for {sql}: {other:?}"),
        }
    }

    #[test]
    fn trino_names_become_sqlite_names() {
        let plan = rows(
            "SELECT o.orderkey FROM memory.default.orders o JOIN \"default\".customers c ON o.custkey = c.custkey",
        );
        assert_eq!(
            plan.sql,
            "SELECT o.orderkey FROM \"memory__default__orders\" o JOIN \"memory__default__customers\" c ON o.custkey = c.custkey"
        );
        assert_eq!(plan.tables.len(), 2);
    }

    #[test]
    fn positions_map_back_to_the_original_text() {
        let plan = rows("SELECT *\nFROM synthetic.big.rows_1k WHERE x");
        let rewritten = plan.sql.find("WHERE").expect("kept");
        assert_eq!(plan.original_position(rewritten), Some((2, 28)));
    }

    #[test]
    fn unknown_tables_and_semicolons_fail_like_trino() {
        let error = plan("SELECT * FROM memory.default.nope", &session()).expect_err("unknown");
        assert_eq!(error.name, "TABLE_NOT_FOUND");
        assert_eq!(error.location, Some((1, 15)));
        let error = plan("SELECT 1;", &session()).expect_err("semicolon");
        assert_eq!(error.name, "SYNTAX_ERROR");
        assert_eq!(error.location, Some((1, 9)));
        let error = plan("DELETE FROM orders", &session()).expect_err("write");
        assert_eq!(error.name, "NOT_SUPPORTED");
    }

    #[test]
    fn show_and_describe_read_the_metadata() {
        assert!(rows("SHOW TABLES FROM tpch.tiny").sql.contains("'tiny'"));
        assert!(rows("DESCRIBE orders").sql.contains("'orders'"));
        let error = plan("SHOW SCHEMAS FROM nope", &session()).expect_err("catalog");
        assert_eq!(error.name, "CATALOG_NOT_FOUND");
        assert!(matches!(
            plan("EXPLAIN (TYPE VALIDATE) SELECT 1", &session()),
            Ok(Plan::Explain { validate: true, .. })
        ));
    }
}
