//! Read-only SQL, enforced by parsing: `trino_query` and `trino_export` run a statement
//! only when [`check_read_only`] finds exactly one statement that reads.
//!
//! The check is an allowlist over the parsed statement (`sqlparser`, generic dialect),
//! never a pattern over the text: a `SELECT`, `WITH … SELECT`, `VALUES`, `TABLE t`, a
//! `SHOW …`, a `DESCRIBE`, or an `EXPLAIN` of one of those. Every nested statement and
//! query is visited too, so a data-modifying CTE (`WITH x AS (DELETE … RETURNING …)`),
//! `SELECT … INTO` and locking clauses are refused wherever they hide.
//!
//! Table functions are refused unless the connection allows them by name
//! ([`ReadOnlyRules::allowed_table_functions`], empty by default): a pass-through function
//! such as `TABLE(postgresql.system.query(query => 'DELETE …'))` hands its text to the
//! connector unchecked, so no parse of ours can tell whether it writes.
//!
//! The parser and Trino must also agree on where comments end, or a comment could hide
//! from us what Trino runs. Two lexical rules differ between the generic dialect and
//! Trino's grammar, and both are refused rather than guessed at:
//!
//! - a block comment containing `/*`: the generic dialect nests block comments, Trino
//!   does not, so `/* /* */ INSERT … -- */` is a comment to one and an `INSERT` to the
//!   other;
//! - a line comment containing a carriage return: Trino ends a `--` comment at `\r`, the
//!   generic dialect only at `\n`.

use std::fmt;
use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, ObjectName, Query, Select, SetExpr, Statement, TableFactor, Visit, Visitor,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::{ALL_KEYWORDS, Keyword};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer, Whitespace};

/// The longest SQL text accepted, in bytes. Trino has its own limits; this one keeps a
/// hostile request from making the parser (and the audit trail) chew on megabytes.
pub const MAX_SQL_BYTES: usize = 1024 * 1024;

/// How deeply expressions and queries may nest. The parser counts its own recursion
/// and stops with an error past this depth instead of overflowing the stack.
const RECURSION_LIMIT: usize = 50;

/// What kind of read a statement is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StatementKind {
    /// A query: `SELECT`, `WITH … SELECT`, a set operation, or `TABLE t`.
    Select,
    /// A bare `VALUES` list.
    Values,
    /// A `SHOW …` statement (catalogs, schemas, tables, columns, create, functions …).
    Show,
    /// `DESCRIBE t` (or `DESC t`).
    Describe,
    /// `EXPLAIN` of a read; see [`ReadOnlyStatement::explain_analyze`].
    Explain,
}

impl StatementKind {
    /// The kind as a lower-case word, for logs and messages.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Select => "select",
            Self::Values => "values",
            Self::Show => "show",
            Self::Describe => "describe",
            Self::Explain => "explain",
        }
    }
}

impl fmt::Display for StatementKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A statement that passed [`check_read_only`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyStatement {
    kind: StatementKind,
    explain_analyze: bool,
    sql: String,
}

impl ReadOnlyStatement {
    /// What kind of read it is.
    #[must_use]
    pub fn kind(&self) -> StatementKind {
        self.kind
    }

    /// Whether this is an `EXPLAIN ANALYZE`, which runs the (read) statement to measure it.
    #[must_use]
    pub fn explain_analyze(&self) -> bool {
        self.explain_analyze
    }

    /// The text to send to Trino: the input with surrounding whitespace and one trailing
    /// `;` removed (Trino's statement endpoint refuses a `;`). Comments are kept.
    #[must_use]
    pub fn sql(&self) -> &str {
        &self.sql
    }
}

/// Why a SQL text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadOnlyError {
    /// Nothing but whitespace, comments or a `;`.
    #[error("the sql is empty: give one SELECT, WITH … SELECT, VALUES, SHOW, DESCRIBE or EXPLAIN")]
    Empty,
    /// Longer than [`MAX_SQL_BYTES`].
    #[error("the sql is {bytes} bytes long; at most {max} bytes are accepted", max = MAX_SQL_BYTES)]
    TooLong {
        /// The length of the input.
        bytes: usize,
    },
    /// The parser could not read it; the message says where.
    #[error("the sql could not be parsed: {message}")]
    Syntax {
        /// The parser's message, with its line and column.
        message: String,
    },
    /// A comment the parser and Trino would end in different places.
    #[error(
        "the sql has an ambiguous comment at line {line}, column {column}: {reason}; \
         remove or rewrite the comment"
    )]
    AmbiguousComment {
        /// The 1-based line of the comment.
        line: u64,
        /// The 1-based column of the comment, in characters.
        column: u64,
        /// What makes it ambiguous.
        reason: &'static str,
    },
    /// More than one statement.
    #[error("the sql holds {count} statements; exactly one read-only statement is allowed")]
    MultipleStatements {
        /// How many statements were found.
        count: usize,
    },
    /// A statement, or a part of one, that is not a read.
    #[error("{what} is not allowed: {why}")]
    NotReadOnly {
        /// What was found, such as `DELETE` or `a data-modifying CTE`.
        what: String,
        /// Why it is refused.
        why: &'static str,
    },
}

/// The reason given for every statement kind outside the allowlist.
const ONLY_READS: &str =
    "only one SELECT, WITH … SELECT, VALUES, SHOW, DESCRIBE or EXPLAIN of a read is allowed";

/// What a connection allows beyond plain reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOnlyRules {
    /// Table functions a statement may call (`TABLE(f(…))`, `FROM f(…)`), by their
    /// name as written, compared case-insensitively (`system.query`,
    /// `postgresql.system.query`). Empty: none.
    pub allowed_table_functions: Vec<String>,
}

impl ReadOnlyRules {
    fn allows(&self, name: &str) -> bool {
        self.allowed_table_functions
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(name))
    }
}

/// [`check_read_only_with`] under the default rules: no table function allowed.
///
/// # Errors
///
/// As [`check_read_only_with`].
pub fn check_read_only(sql: &str) -> Result<ReadOnlyStatement, ReadOnlyError> {
    check_read_only_with(sql, &ReadOnlyRules::default())
}

/// Checks that `sql` is exactly one statement that only reads, and says what kind.
///
/// # Errors
///
/// Returns a [`ReadOnlyError`] saying why the text is refused: it is empty or too long,
/// does not parse (with the parser's position), has an ambiguous comment, holds several
/// statements, or writes, changes the session or schema, calls a procedure, or calls a
/// table function `rules` do not allow, anywhere in it.
pub fn check_read_only_with(
    sql: &str,
    rules: &ReadOnlyRules,
) -> Result<ReadOnlyStatement, ReadOnlyError> {
    if sql.len() > MAX_SQL_BYTES {
        return Err(ReadOnlyError::TooLong { bytes: sql.len() });
    }
    let dialect = GenericDialect;
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|error| ReadOnlyError::Syntax {
            message: error.to_string(),
        })?;
    reject_ambiguous_comments(&tokens)?;

    // Find the statement's end: one trailing `;` is dropped (Trino refuses it), and any
    // other `;` outside a literal or comment separates statements.
    let significant: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|token| !matches!(token.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let Some(last) = significant.last() else {
        return Err(ReadOnlyError::Empty);
    };
    let trailing_semicolon = (last.token == Token::SemiColon).then_some(last.span.start);
    let semicolons = significant
        .iter()
        .filter(|token| token.token == Token::SemiColon)
        .count();
    if semicolons > usize::from(trailing_semicolon.is_some()) {
        // Count the statements the way a reader would: `;;` and a lone `;` hold none.
        let count = sql_statement_count(&significant);
        return Err(if count <= 1 {
            ReadOnlyError::Syntax {
                message: "an empty statement between two `;`".to_owned(),
            }
        } else {
            ReadOnlyError::MultipleStatements { count }
        });
    }
    if significant.len() == 1 && trailing_semicolon.is_some() {
        return Err(ReadOnlyError::Empty);
    }
    let end = match trailing_semicolon {
        Some(location) => byte_offset(sql, location),
        None => sql.len(),
    };
    let text = sql.get(..end).unwrap_or(sql).trim();
    let statement_tokens =
        &significant[..significant.len() - usize::from(trailing_semicolon.is_some())];
    if is_table_shorthand(statement_tokens) {
        // `TABLE t` is `SELECT * FROM t` (the generic dialect does not parse it).
        return Ok(ReadOnlyStatement {
            kind: StatementKind::Select,
            explain_analyze: false,
            sql: text.to_owned(),
        });
    }

    let mut statements = Parser::new(&dialect)
        .with_recursion_limit(RECURSION_LIMIT)
        .with_tokens_with_locations(tokens)
        .parse_statements()
        .map_err(|error| ReadOnlyError::Syntax {
            message: match error {
                ParserError::TokenizerError(message) | ParserError::ParserError(message) => message,
                ParserError::RecursionLimitExceeded => {
                    format!("the statement nests more than {RECURSION_LIMIT} levels deep")
                }
            },
        })?;
    let statement = match statements.len() {
        0 => return Err(ReadOnlyError::Empty),
        1 => statements.remove(0),
        count => return Err(ReadOnlyError::MultipleStatements { count }),
    };

    let (kind, explain_analyze) = classify(&statement)?;
    reject_nested_writes(&statement, rules)?;
    Ok(ReadOnlyStatement {
        kind,
        explain_analyze,
        sql: text.to_owned(),
    })
}

/// Whether the statement's tokens are exactly `TABLE name[.name…]`: nothing else.
fn is_table_shorthand(tokens: &[&TokenWithSpan]) -> bool {
    let Some((first, name)) = tokens.split_first() else {
        return false;
    };
    let is_table = matches!(&first.token, Token::Word(word) if word.keyword == Keyword::TABLE);
    is_table
        && name.len() % 2 == 1
        && name.iter().enumerate().all(|(index, token)| {
            if index % 2 == 0 {
                matches!(&token.token, Token::Word(_))
            } else {
                token.token == Token::Period
            }
        })
}

/// Refuses comments whose end the generic dialect and Trino would place differently
/// (see the module documentation).
fn reject_ambiguous_comments(tokens: &[TokenWithSpan]) -> Result<(), ReadOnlyError> {
    for token in tokens {
        let reason = match &token.token {
            Token::Whitespace(Whitespace::MultiLineComment(text)) if text.contains("/*") => {
                "a block comment contains `/*`, and Trino does not nest block comments"
            }
            // A `\r\n` (or a final `\r`) ends the comment for both; any other `\r`
            // ends it only for Trino.
            Token::Whitespace(Whitespace::SingleLineComment { comment, .. })
                if without_line_end(comment).contains('\r') =>
            {
                "a line comment contains a carriage return, where Trino ends it"
            }
            _ => continue,
        };
        return Err(ReadOnlyError::AmbiguousComment {
            line: token.span.start.line,
            column: token.span.start.column,
            reason,
        });
    }
    Ok(())
}

/// A line comment's text without the `\n`, `\r\n` or `\r` that ends it.
fn without_line_end(comment: &str) -> &str {
    let comment = comment.strip_suffix('\n').unwrap_or(comment);
    comment.strip_suffix('\r').unwrap_or(comment)
}

/// How many non-empty statements the `;`-separated token runs hold.
fn sql_statement_count(significant: &[&TokenWithSpan]) -> usize {
    significant
        .split(|token| token.token == Token::SemiColon)
        .filter(|run| !run.is_empty())
        .count()
}

/// The byte offset of a tokenizer location (1-based line, 1-based column in characters).
fn byte_offset(sql: &str, location: Location) -> usize {
    let mut line = 1;
    let mut column = 1;
    for (offset, character) in sql.char_indices() {
        if line == location.line && column == location.column {
            return offset;
        }
        if character == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    sql.len()
}

/// The kind of the top-level statement, and whether it is an `EXPLAIN ANALYZE`.
fn classify(statement: &Statement) -> Result<(StatementKind, bool), ReadOnlyError> {
    match statement {
        Statement::Query(query) => Ok((query_kind(query), false)),
        Statement::ShowFunctions { .. }
        | Statement::ShowVariable { .. }
        | Statement::ShowVariables { .. }
        | Statement::ShowStatus { .. }
        | Statement::ShowCreate { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowCatalogs { .. }
        | Statement::ShowDatabases { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowCharset(_)
        | Statement::ShowObjects(_)
        | Statement::ShowTables { .. }
        | Statement::ShowViews { .. }
        | Statement::ShowCollation { .. } => Ok((StatementKind::Show, false)),
        Statement::ExplainTable { .. } => Ok((StatementKind::Describe, false)),
        Statement::Explain {
            analyze,
            statement: inner,
            options,
            ..
        } => {
            // Postgres-style `EXPLAIN (ANALYZE) …` says the same thing as `EXPLAIN ANALYZE`.
            let analyze = *analyze
                || options.iter().flatten().any(|option| {
                    option.name.value.eq_ignore_ascii_case("analyze")
                        && option
                            .arg
                            .as_ref()
                            .is_none_or(|arg| !arg.to_string().eq_ignore_ascii_case("false"))
                });
            match classify(inner) {
                Ok(_) => Ok((StatementKind::Explain, analyze)),
                Err(ReadOnlyError::NotReadOnly { what, .. }) => Err(ReadOnlyError::NotReadOnly {
                    what: format!("EXPLAIN{} of {what}", if analyze { " ANALYZE" } else { "" }),
                    why: if analyze {
                        "EXPLAIN ANALYZE runs the statement it explains, and only reads may run"
                    } else {
                        "only reads may be explained"
                    },
                }),
                Err(other) => Err(other),
            }
        }
        other => Err(ReadOnlyError::NotReadOnly {
            what: statement_name(other),
            why: ONLY_READS,
        }),
    }
}

/// Whether a top-level query is a bare `VALUES` list or a query proper.
fn query_kind(query: &Query) -> StatementKind {
    match query.body.as_ref() {
        SetExpr::Values(_) if query.with.is_none() => StatementKind::Values,
        _ => StatementKind::Select,
    }
}

/// Walks every nested statement, query and select for anything that is not a read.
fn reject_nested_writes(statement: &Statement, rules: &ReadOnlyRules) -> Result<(), ReadOnlyError> {
    match statement.visit(&mut NestedWriteFinder { rules }) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(error) => Err(error),
    }
}

/// The visitor behind [`reject_nested_writes`].
struct NestedWriteFinder<'a> {
    rules: &'a ReadOnlyRules,
}

/// A dotted name as written, without quotes: `system.query`.
fn dotted(name: &ObjectName) -> String {
    name.0
        .iter()
        .map(|part| {
            part.as_ident()
                .map_or_else(|| part.to_string(), |ident| ident.value.clone())
        })
        .collect::<Vec<_>>()
        .join(".")
}

impl Visitor for NestedWriteFinder<'_> {
    type Break = ReadOnlyError;

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<Self::Break> {
        let name = match factor {
            TableFactor::Table {
                name,
                args: Some(_),
                ..
            }
            | TableFactor::Function { name, .. } => Some(dotted(name)),
            TableFactor::TableFunction { expr, .. } => match expr {
                Expr::Function(function) => Some(dotted(&function.name)),
                // Anything else in TABLE(…) is no function we can name: refused.
                _ => Some(String::new()),
            },
            _ => None,
        };
        match name {
            Some(name) if !self.rules.allows(&name) => {
                ControlFlow::Break(ReadOnlyError::NotReadOnly {
                    what: if name.is_empty() {
                        "a table function".to_owned()
                    } else {
                        format!("the table function {name}")
                    },
                    why: "a table function may hand its text to the data source unchecked; \
                          the connection must allow it by name \
                          (readonly.allowed_table_functions)",
                })
            }
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<Self::Break> {
        // The top-level statement was classified already; any statement met here is
        // either that one again or nested inside it, such as the `DELETE` of a
        // data-modifying CTE, and must itself be a read.
        match classify(statement) {
            Ok(_) => ControlFlow::Continue(()),
            Err(ReadOnlyError::NotReadOnly { what, .. }) => {
                ControlFlow::Break(ReadOnlyError::NotReadOnly {
                    what: format!(
                        "{what} nested in the statement (for example a data-modifying CTE)"
                    ),
                    why: "a read-only statement may not contain a write anywhere",
                })
            }
            Err(other) => ControlFlow::Break(other),
        }
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<Self::Break> {
        if !query.locks.is_empty() {
            return ControlFlow::Break(ReadOnlyError::NotReadOnly {
                what: "a locking clause (FOR UPDATE / FOR SHARE)".to_owned(),
                why: "it locks rows for a later write",
            });
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<Self::Break> {
        if select.into.is_some() {
            return ControlFlow::Break(ReadOnlyError::NotReadOnly {
                what: "SELECT … INTO".to_owned(),
                why: "it creates a table from the result",
            });
        }
        ControlFlow::Continue(())
    }
}

/// A short upper-case name for a refused statement: the leading keywords of the
/// parser's rendering of it, without names or values, so the message never echoes data.
fn statement_name(statement: &Statement) -> String {
    let text = statement.to_string();
    let words: Vec<&str> = text
        .split_whitespace()
        .take_while(|word| ALL_KEYWORDS.binary_search(word).is_ok())
        .take(3)
        .collect();
    if words.is_empty() {
        "this statement".to_owned()
    } else {
        words.join(" ")
    }
}
