//! Parsing a script: the dialect, the source-size limit, a nesting guard, and syntax errors with
//! their line.

use std::collections::HashSet;

use starlark::analysis::AstModuleLint;
use starlark::codemap::Span;
use starlark::syntax::ast::AstExpr;
use starlark::syntax::{AstModule, Dialect, DialectTypes};

use crate::{Limits, SyntaxError};

/// The name a script is parsed under; it appears in tracebacks (`script.star:3`).
pub(crate) const FILE_NAME: &str = "script.star";

/// The deepest bracket nesting a script may have, and the longest run of prefix operators
/// (`- - x`). The parser recurses once (or more) per level, so an unbounded depth would let a
/// hostile source overflow the stack of whoever parses it. Real scripts, JSON literals
/// included, stay far below this.
const MAX_NESTING: usize = 100;

/// The deepest expression tree a script may have (`a + b + c ...` nests one level per term).
/// The compiler and evaluator recurse over it.
const MAX_EXPRESSION_DEPTH: usize = 1000;

/// The dialect of the original platform's scripts: `def`, `lambda`, `for` and `if` at the top
/// level (a script runs top to bottom), no `load`, no type annotations or f-strings. There is no
/// `while` in this Starlark at all, as in the original.
fn dialect() -> Dialect {
    Dialect {
        enable_def: true,
        enable_lambda: true,
        enable_load: false,
        enable_keyword_only_arguments: false,
        enable_positional_only_arguments: false,
        enable_types: DialectTypes::Disable,
        enable_load_reexport: false,
        enable_top_level_stmt: true,
        enable_f_strings: false,
        ..Dialect::Standard
    }
}

/// Parses `source` under the script dialect.
pub(crate) fn parse(source: &str, limits: &Limits) -> Result<AstModule, SyntaxError> {
    if source.len() > limits.max_source_bytes {
        return Err(SyntaxError {
            message: source_limit_message(source.len(), limits.max_source_bytes),
            line: None,
        });
    }
    check_nesting(source)?;
    let ast = AstModule::parse(FILE_NAME, source.to_owned(), &dialect()).map_err(|error| {
        SyntaxError {
            line: error
                .span()
                .and_then(|span| u32::try_from(span.resolve_span().begin.line + 1).ok()),
            message: error.without_diagnostic().to_string(),
        }
    })?;
    check_expression_depth(&ast)?;
    Ok(ast)
}

/// Refuses a script that uses a name nothing defines (`platfrom.call`), the way the run would
/// refuse it, but before it is saved. Only certain errors: a name that may be unassigned on some
/// path is left for the run to find.
pub(crate) fn check_names(
    ast: &AstModule,
    predeclared: &HashSet<String>,
) -> Result<(), SyntaxError> {
    let undefined = ast
        .lint(Some(predeclared))
        .into_iter()
        .find(|lint| lint.short_name == "using-undefined");
    match undefined {
        None => Ok(()),
        Some(lint) => Err(SyntaxError {
            line: u32::try_from(lint.location.resolve_span().begin.line + 1).ok(),
            message: lint.problem,
        }),
    }
}

/// Refuses expression trees deeper than [`MAX_EXPRESSION_DEPTH`], walking them with a stack of
/// its own rather than by recursion.
fn check_expression_depth(ast: &AstModule) -> Result<(), SyntaxError> {
    let mut pending: Vec<(&AstExpr, usize)> = Vec::new();
    ast.statement()
        .visit_expr(|expression| pending.push((expression, 1)));
    while let Some((expression, depth)) = pending.pop() {
        if depth > MAX_EXPRESSION_DEPTH {
            return Err(SyntaxError {
                message: format!(
                    "an expression is nested more than {MAX_EXPRESSION_DEPTH} levels deep; split \
                     it into several statements"
                ),
                line: line_of(ast, expression.span),
            });
        }
        expression.visit_expr(|child| pending.push((child, depth + 1)));
    }
    Ok(())
}

/// The 1-based line `span` starts on.
fn line_of(ast: &AstModule, span: Span) -> Option<u32> {
    u32::try_from(ast.file_span(span).resolve_span().begin.line + 1).ok()
}

/// The error for a source over [`Limits::max_source_bytes`].
pub(crate) fn source_limit_message(size: usize, limit: usize) -> String {
    format!(
        "the script is {size} bytes, over its source size limit of {limit} bytes; move data into \
         parameters or queries"
    )
}

/// Refuses bracket nesting deeper than [`MAX_NESTING`], skipping string literals and comments.
/// A rough lexer is enough: it only has to be right about brackets in code, and a source it
/// misreads is one the parser refuses anyway.
fn check_nesting(source: &str) -> Result<(), SyntaxError> {
    let bytes = source.as_bytes();
    let mut depth = 0usize;
    let mut prefix_run = 0usize;
    let mut line = 1u32;
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if matches!(byte, b'-' | b'+' | b'~') {
            prefix_run += 1;
            if prefix_run > MAX_NESTING {
                return Err(SyntaxError {
                    message: format!("more than {MAX_NESTING} operators in a row"),
                    line: Some(line),
                });
            }
        } else if !matches!(byte, b' ' | b'\t') {
            prefix_run = 0;
        }
        match byte {
            b'\n' => line += 1,
            b'#' => {
                while bytes.get(index).is_some_and(|&b| b != b'\n') {
                    index += 1;
                }
                continue;
            }
            b'\'' | b'"' => {
                let triple =
                    bytes.get(index + 1) == Some(&byte) && bytes.get(index + 2) == Some(&byte);
                index += if triple { 3 } else { 1 };
                loop {
                    match bytes.get(index) {
                        None => return Ok(()),
                        Some(b'\\') => index += 1,
                        Some(b'\n') => {
                            line += 1;
                            if !triple {
                                break;
                            }
                        }
                        Some(&b) if b == byte => {
                            if !triple {
                                break;
                            }
                            if bytes.get(index + 1) == Some(&byte)
                                && bytes.get(index + 2) == Some(&byte)
                            {
                                index += 2;
                                break;
                            }
                        }
                        Some(_) => {}
                    }
                    index += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(SyntaxError {
                        message: format!("brackets are nested more than {MAX_NESTING} levels deep"),
                        line: Some(line),
                    });
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        index += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets_inside_strings_and_comments_do_not_count() {
        let deep = "(".repeat(MAX_NESTING + 1);
        let source = format!("x = '{deep}'\ny = \"\"\"{deep}\n{deep}\"\"\"\n# {deep}\nz = 1\n");
        assert!(check_nesting(&source).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_with_its_line() {
        let source = format!("x = 1\ny = {}1{}\n", "[".repeat(500), "]".repeat(500));
        let error = check_nesting(&source).err();
        assert_eq!(error.and_then(|error| error.line), Some(2));
    }

    #[test]
    fn long_runs_of_prefix_operators_are_refused() {
        assert!(check_nesting(&format!("x = {}1\n", "- ".repeat(MAX_NESTING))).is_ok());
        assert!(check_nesting(&format!("x = {}1\n", "-".repeat(MAX_NESTING + 1))).is_err());
        assert!(check_nesting(&format!("x = {}1\n", "1 - ".repeat(10 * MAX_NESTING))).is_ok());
    }

    #[test]
    fn deep_expressions_are_refused_with_their_line() {
        let limits = Limits::run();
        let shallow = format!("x = 1\ny = {}1\n", "1 + ".repeat(MAX_EXPRESSION_DEPTH - 2));
        assert!(parse(&shallow, &limits).is_ok());
        let deep = format!("x = 1\ny = {}1\n", "1 + ".repeat(MAX_EXPRESSION_DEPTH));
        let error = parse(&deep, &limits).err();
        assert_eq!(error.and_then(|error| error.line), Some(2));
    }

    #[test]
    fn escaped_quotes_do_not_end_a_string() {
        let deep = "(".repeat(MAX_NESTING + 1);
        let source = format!("x = 'it\\'s {deep}'\n");
        assert!(check_nesting(&source).is_ok());
    }
}
