//! Anchored edits of a script's source: the original platform's patch
//! grammar. An edit finds exact text (`find`) or a regular expression
//! (`pattern`) and replaces it, inserts before or after it, or appends or
//! prepends text to the source (or to one top-level function, its
//! `section`). An anchor must match exactly once unless `occurrence` says
//! which match (`first`, `last`, `all` or a 1-based index); anything else
//! aborts the whole patch with a stable [`PatchCode`]. Line numbers are only
//! ever reported, never taken as anchors: they are stale after the first
//! edit.
//!
//! Edits apply in order, each to the text the previous one left.

use regex::RegexBuilder;
use serde_json::Value;

use super::outline;

/// The most edits one patch carries.
pub const MAX_EDITS: usize = 100;

/// The longest anchor (`find` or `pattern`), in bytes.
pub const MAX_ANCHOR_BYTES: usize = 512;

/// The most matches `occurrence: "all"` changes.
pub const MAX_MATCHES: usize = 1000;

/// The most memory one compiled pattern may take: a short pattern with counted
/// repetitions (`(?:\w{100}){100}`) compiles to far more than its text.
const MAX_PATTERN_PROGRAM: usize = 1 << 20;

/// What an edit does at its anchor.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditOp {
    /// Replaces the match (an empty replacement deletes it).
    Replace,
    /// Inserts text just before the match.
    InsertBefore,
    /// Inserts text just after the match.
    InsertAfter,
    /// Adds text at the end of the source, or of its section.
    Append,
    /// Adds text at the start of the source, or of its section.
    Prepend,
}

impl EditOp {
    /// Its name in the grammar.
    pub fn as_str(self) -> &'static str {
        match self {
            EditOp::Replace => "replace",
            EditOp::InsertBefore => "insert_before",
            EditOp::InsertAfter => "insert_after",
            EditOp::Append => "append",
            EditOp::Prepend => "prepend",
        }
    }

    /// The op a name names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "replace" => Some(EditOp::Replace),
            "insert_before" => Some(EditOp::InsertBefore),
            "insert_after" => Some(EditOp::InsertAfter),
            "append" => Some(EditOp::Append),
            "prepend" => Some(EditOp::Prepend),
            _ => None,
        }
    }

    /// Whether it needs an anchor.
    fn anchored(self) -> bool {
        !matches!(self, EditOp::Append | EditOp::Prepend)
    }
}

/// What an anchored edit looks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// This exact text.
    Find(String),
    /// A regular expression (RE2 syntax, no look-around or back-references).
    Pattern(String),
}

/// Which of an anchor's matches an edit changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Occurrence {
    /// The only one: more than one match is [`PatchCode::Ambiguous`].
    Only,
    /// The first.
    First,
    /// The last.
    Last,
    /// Every one (at most [`MAX_MATCHES`]).
    All,
    /// The n-th, from 1.
    Nth(usize),
}

/// One edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    /// What it does.
    pub op: EditOp,
    /// What it looks for; `None` for `append` and `prepend`.
    pub anchor: Option<Anchor>,
    /// The replacement or the text to insert.
    pub text: String,
    /// The top-level function the edit is confined to.
    pub section: Option<String>,
    /// Which match it changes.
    pub occurrence: Occurrence,
}

/// Why a patch was refused; the codes are stable, for agents to act on.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchCode {
    /// An anchor matched nothing.
    NoMatch,
    /// An anchor matched more than once and no `occurrence` chose one.
    Ambiguous,
    /// The script changed since the version the edits were written against.
    StaleBase,
    /// No top-level function has the edit's `section` name.
    SectionNotFound,
    /// A `pattern` is not a valid regular expression.
    BadPattern,
    /// An edit is malformed (no anchor, both `find` and `pattern`, an
    /// unknown op or occurrence, too many edits, an anchor too long).
    BadEdit,
    /// The result would be larger than a script may be.
    TooLarge,
}

impl PatchCode {
    /// The stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            PatchCode::NoMatch => "PATCH_NO_MATCH",
            PatchCode::Ambiguous => "PATCH_AMBIGUOUS",
            PatchCode::StaleBase => "PATCH_STALE_BASE",
            PatchCode::SectionNotFound => "PATCH_SECTION_NOT_FOUND",
            PatchCode::BadPattern => "PATCH_BAD_PATTERN",
            PatchCode::BadEdit => "PATCH_BAD_EDIT",
            PatchCode::TooLarge => "PATCH_TOO_LARGE",
        }
    }

    /// What to do about it.
    pub fn hint(self) -> &'static str {
        match self {
            PatchCode::NoMatch => {
                "Re-read the source (manage_script get) and anchor on text it contains exactly."
            }
            PatchCode::Ambiguous => {
                "Give a longer anchor that occurs once, a section, or an occurrence (first, last, all or a number)."
            }
            PatchCode::StaleBase => {
                "The script changed since you read it: re-read it and re-anchor your edits."
            }
            PatchCode::SectionNotFound => {
                "A section is the name of a top-level function; see manage_script outline."
            }
            PatchCode::BadPattern => "Fix the regular expression (RE2 syntax) or use find.",
            PatchCode::BadEdit => {
                "An edit is {op?, find | pattern, replace | text, section?, occurrence?}."
            }
            PatchCode::TooLarge => "Keep the script under its size limit.",
        }
    }
}

/// A refused patch: the code, which edit (from 0) when one is to blame, and
/// what happened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PatchError {
    /// The stable code.
    pub code: PatchCode,
    /// The edit's index, from 0.
    pub index: Option<usize>,
    /// What happened, naming the edit.
    pub message: String,
}

impl PatchError {
    fn new(code: PatchCode, index: Option<usize>, message: impl Into<String>) -> Self {
        Self {
            code,
            index,
            message: message.into(),
        }
    }

    /// A refusal for a stale `base_version`.
    pub fn stale_base(base: i64, current: i64) -> Self {
        Self::new(
            PatchCode::StaleBase,
            None,
            format!(
                "the edits were written against version {base}, but the script is at version {current}"
            ),
        )
    }
}

/// What one edit did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditReport {
    /// Its index, from 0.
    pub index: usize,
    /// Its op.
    pub op: EditOp,
    /// How many matches its anchor had (in its section); 0 for append and
    /// prepend.
    pub matches: usize,
    /// The 1-based line of the new source where its text landed (the first
    /// place, for `all`).
    pub line: usize,
}

/// A patched source and what each edit did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patched {
    /// The source after every edit.
    pub source: String,
    /// One report per edit, in order.
    pub edits: Vec<EditReport>,
}

/// Reads the edits of a `patch` call: `[{op?, find | pattern, replace | text,
/// section?, occurrence?}]`.
///
/// # Errors
/// [`PatchCode::BadEdit`] naming the edit and what is wrong with it.
pub fn parse_edits(value: &Value) -> Result<Vec<Edit>, PatchError> {
    let Some(list) = value.as_array() else {
        return Err(PatchError::new(
            PatchCode::BadEdit,
            None,
            "edits must be a list of {op?, find | pattern, replace | text, section?, occurrence?}",
        ));
    };
    if list.is_empty() {
        return Err(PatchError::new(PatchCode::BadEdit, None, "edits is empty"));
    }
    if list.len() > MAX_EDITS {
        return Err(PatchError::new(
            PatchCode::BadEdit,
            None,
            format!(
                "a patch has at most {MAX_EDITS} edits, this one {}",
                list.len()
            ),
        ));
    }
    list.iter()
        .enumerate()
        .map(|(index, edit)| parse_edit(index, edit))
        .collect()
}

fn parse_edit(index: usize, value: &Value) -> Result<Edit, PatchError> {
    let bad = |message: String| PatchError::new(PatchCode::BadEdit, Some(index), message);
    let Some(object) = value.as_object() else {
        return Err(bad(format!("edit {index} is not an object")));
    };
    for key in object.keys() {
        if !matches!(
            key.as_str(),
            "op" | "find" | "pattern" | "replace" | "text" | "section" | "occurrence"
        ) {
            return Err(bad(format!("edit {index} has an unknown field {key:?}")));
        }
    }
    let string = |key: &str| -> Result<Option<String>, PatchError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(bad(format!("edit {index}: {key} must be a string"))),
        }
    };
    let op = match string("op")? {
        None => EditOp::Replace,
        Some(name) => EditOp::parse(&name).ok_or_else(|| {
            bad(format!(
                "edit {index}: op {name:?} is not replace, insert_before, insert_after, append or prepend"
            ))
        })?,
    };
    let anchor = match (string("find")?, string("pattern")?) {
        (Some(_), Some(_)) => {
            return Err(bad(format!("edit {index} gives both find and pattern")));
        }
        (Some(find), None) => Some(Anchor::Find(find)),
        (None, Some(pattern)) => Some(Anchor::Pattern(pattern)),
        (None, None) => None,
    };
    match &anchor {
        None if op.anchored() => {
            return Err(bad(format!(
                "edit {index} ({}) needs find or pattern",
                op.as_str()
            )));
        }
        Some(_) if !op.anchored() => {
            return Err(bad(format!(
                "edit {index} ({}) takes no anchor; use section to aim it",
                op.as_str()
            )));
        }
        Some(Anchor::Find(text) | Anchor::Pattern(text)) if text.is_empty() => {
            return Err(bad(format!("edit {index} has an empty anchor")));
        }
        Some(Anchor::Find(text) | Anchor::Pattern(text)) if text.len() > MAX_ANCHOR_BYTES => {
            return Err(bad(format!(
                "edit {index}: an anchor is at most {MAX_ANCHOR_BYTES} bytes"
            )));
        }
        _ => {}
    }
    let text = match (string("replace")?, string("text")?) {
        (Some(_), Some(_)) => {
            return Err(bad(format!("edit {index} gives both replace and text")));
        }
        (Some(text), None) | (None, Some(text)) => text,
        (None, None) if op == EditOp::Replace => {
            return Err(bad(format!(
                "edit {index} needs replace (an empty string deletes the match)"
            )));
        }
        (None, None) => return Err(bad(format!("edit {index} needs text"))),
    };
    let occurrence = match object.get("occurrence") {
        None | Some(Value::Null) => Occurrence::Only,
        Some(Value::String(name)) => match name.as_str() {
            "first" => Occurrence::First,
            "last" => Occurrence::Last,
            "all" => Occurrence::All,
            number => nth(number.parse::<u64>().ok()).ok_or_else(|| {
                bad(format!(
                    "edit {index}: occurrence {name:?} is not first, last, all or a number from 1"
                ))
            })?,
        },
        Some(Value::Number(number)) => nth(number.as_u64()).ok_or_else(|| {
            bad(format!(
                "edit {index}: occurrence must be first, last, all or a number from 1"
            ))
        })?,
        Some(_) => {
            return Err(bad(format!(
                "edit {index}: occurrence must be first, last, all or a number from 1"
            )));
        }
    };
    Ok(Edit {
        op,
        anchor,
        text,
        section: string("section")?,
        occurrence,
    })
}

fn nth(number: Option<u64>) -> Option<Occurrence> {
    let number = usize::try_from(number?).ok()?;
    (number >= 1).then_some(Occurrence::Nth(number))
}

/// Applies `edits` to `source` in order; all or nothing. The result may be at
/// most `max_bytes` long.
///
/// # Errors
/// The first edit that cannot apply, with its [`PatchCode`].
pub fn apply(source: &str, edits: &[Edit], max_bytes: usize) -> Result<Patched, PatchError> {
    let mut current = source.to_owned();
    let mut reports = Vec::with_capacity(edits.len());
    for (index, edit) in edits.iter().enumerate() {
        let (next, report) = apply_one(&current, index, edit, max_bytes)?;
        current = next;
        reports.push(report);
    }
    Ok(Patched {
        source: current,
        edits: reports,
    })
}

/// The 1-based line of byte `offset`.
fn line_at(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.bytes().filter(|&b| b == b'\n').count())
        + 1
}

/// Refuses an edit whose result would be `size` bytes (`None`: more than a `usize`
/// holds) when that is over `max_bytes`. Called before the result is built, so a
/// small edit that multiplies (one long replacement for every match) costs
/// nothing but this sum.
fn check_size(size: Option<usize>, max_bytes: usize, index: usize) -> Result<(), PatchError> {
    match size {
        Some(size) if size <= max_bytes => Ok(()),
        size => Err(PatchError::new(
            PatchCode::TooLarge,
            Some(index),
            format!(
                "after edit {index} the script would be {} bytes, over its limit of {max_bytes}",
                size.map_or_else(|| "more than 2^64".to_owned(), |size| size.to_string())
            ),
        )),
    }
}

fn apply_one(
    source: &str,
    index: usize,
    edit: &Edit,
    max_bytes: usize,
) -> Result<(String, EditReport), PatchError> {
    let (start, end) = match &edit.section {
        None => (0, source.len()),
        Some(name) => {
            let item = outline::function(source, name).ok_or_else(|| {
                PatchError::new(
                    PatchCode::SectionNotFound,
                    Some(index),
                    format!("edit {index}: the script has no top-level function {name:?}"),
                )
            })?;
            (item.start, item.end)
        }
    };
    let scope = source.get(start..end).unwrap_or_default();
    let report = |matches: usize, at: usize, text: &str| EditReport {
        index,
        op: edit.op,
        matches,
        line: line_at(text, at),
    };
    let Some(anchor) = &edit.anchor else {
        let at = if edit.op == EditOp::Append {
            end
        } else {
            start
        };
        check_size(source.len().checked_add(edit.text.len()), max_bytes, index)?;
        let mut next = String::with_capacity(source.len() + edit.text.len());
        next.push_str(source.get(..at).unwrap_or_default());
        next.push_str(&edit.text);
        next.push_str(source.get(at..).unwrap_or_default());
        let done = report(0, at, &next);
        return Ok((next, done));
    };
    let found = matches(scope, anchor, index)?;
    let what = match anchor {
        Anchor::Find(text) => format!("find {text:?}"),
        Anchor::Pattern(pattern) => format!("pattern {pattern:?}"),
    };
    let inside = edit
        .section
        .as_ref()
        .map(|name| format!(" in function {name:?}"))
        .unwrap_or_default();
    if found.is_empty() {
        return Err(PatchError::new(
            PatchCode::NoMatch,
            Some(index),
            format!("edit {index}: {what} matches nothing{inside}"),
        ));
    }
    let count = found.len();
    let chosen: Vec<(usize, usize)> = match edit.occurrence {
        Occurrence::Only if count > 1 => {
            let lines: Vec<String> = found
                .iter()
                .take(10)
                .map(|&(at, _)| line_at(source, start + at).to_string())
                .collect();
            return Err(PatchError::new(
                PatchCode::Ambiguous,
                Some(index),
                format!(
                    "edit {index}: {what} matches {count} times{inside} (lines {})",
                    lines.join(", ")
                ),
            ));
        }
        Occurrence::Only | Occurrence::First => found.first().copied().into_iter().collect(),
        Occurrence::Last => found.last().copied().into_iter().collect(),
        Occurrence::All if count > MAX_MATCHES => {
            return Err(PatchError::new(
                PatchCode::BadEdit,
                Some(index),
                format!(
                    "edit {index}: {what} matches {count} times, more than the {MAX_MATCHES} that all may change"
                ),
            ));
        }
        Occurrence::All => found,
        Occurrence::Nth(number) => match found.get(number - 1) {
            Some(&span) => vec![span],
            None => {
                return Err(PatchError::new(
                    PatchCode::NoMatch,
                    Some(index),
                    format!(
                        "edit {index}: {what} matches {count} times{inside}, so there is no occurrence {number}"
                    ),
                ));
            }
        },
    };
    // The result's size, summed before anything is built: a replacement takes
    // the matched text's place, an insertion adds to it.
    let size = chosen
        .iter()
        .try_fold(source.len(), |size, &(match_start, match_end)| {
            let removed = if edit.op == EditOp::Replace {
                match_end - match_start
            } else {
                0
            };
            size.checked_add(edit.text.len())?.checked_sub(removed)
        });
    check_size(size, max_bytes, index)?;
    let mut next = String::with_capacity(size.unwrap_or_default());
    let mut copied = 0;
    let mut first_landing = None;
    for (match_start, match_end) in chosen {
        let (at_start, at_end) = (start + match_start, start + match_end);
        next.push_str(source.get(copied..at_start).unwrap_or_default());
        let matched = source.get(at_start..at_end).unwrap_or_default();
        let landing = match edit.op {
            EditOp::InsertAfter => next.len() + matched.len(),
            _ => next.len(),
        };
        first_landing.get_or_insert(landing);
        match edit.op {
            EditOp::InsertBefore => {
                next.push_str(&edit.text);
                next.push_str(matched);
            }
            EditOp::InsertAfter => {
                next.push_str(matched);
                next.push_str(&edit.text);
            }
            _ => next.push_str(&edit.text),
        }
        copied = at_end;
    }
    next.push_str(source.get(copied..).unwrap_or_default());
    let done = report(count, first_landing.unwrap_or(0), &next);
    Ok((next, done))
}

/// The non-overlapping, non-empty matches of `anchor` in `scope`, as byte spans.
fn matches(scope: &str, anchor: &Anchor, index: usize) -> Result<Vec<(usize, usize)>, PatchError> {
    match anchor {
        Anchor::Find(text) => Ok(scope
            .match_indices(text.as_str())
            .map(|(at, found)| (at, at + found.len()))
            .collect()),
        Anchor::Pattern(pattern) => {
            let regex = RegexBuilder::new(pattern)
                .size_limit(MAX_PATTERN_PROGRAM)
                .build()
                .map_err(|error| {
                    PatchError::new(
                        PatchCode::BadPattern,
                        Some(index),
                        format!("edit {index}: the pattern does not compile: {error}"),
                    )
                })?;
            Ok(regex
                .find_iter(scope)
                .filter(|found| !found.is_empty())
                .map(|found| (found.start(), found.end()))
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const SOURCE: &str = "\
def total(rows):
    sum = 0
    for row in rows:
        sum += row[\"n\"]
    return sum

rows = platform.query(\"SELECT n FROM t\")[\"rows\"]
print(total(rows))
print(\"done\")
";

    fn patch(edits: Value) -> Result<Patched, PatchError> {
        apply(SOURCE, &parse_edits(&edits)?, 1 << 20)
    }

    #[test]
    fn replace_is_the_default_op_and_reports_its_line() {
        let patched = patch(json!([{"find": "SELECT n FROM t", "replace": "SELECT n FROM u"}]))
            .expect("patched");
        assert!(patched.source.contains("SELECT n FROM u"));
        assert_eq!(
            patched.edits,
            vec![EditReport {
                index: 0,
                op: EditOp::Replace,
                matches: 1,
                line: 7
            }]
        );
    }

    #[test]
    fn inserts_land_beside_their_anchor() {
        let patched = patch(json!([
            {"op": "insert_before", "find": "    return sum\n", "text": "    print(sum)\n"},
            {"op": "insert_after", "find": "print(\"done\")\n", "text": "print(\"bye\")\n"},
        ]))
        .expect("patched");
        assert!(patched.source.contains("    print(sum)\n    return sum\n"));
        assert!(
            patched
                .source
                .ends_with("print(\"done\")\nprint(\"bye\")\n")
        );
        assert_eq!(patched.edits[0].line, 5);
        assert_eq!(patched.edits[1].line, 11);
    }

    #[test]
    fn an_ambiguous_anchor_aborts_unless_an_occurrence_chooses() {
        let refused = patch(json!([{"find": "print(", "replace": "log("}])).expect_err("ambiguous");
        assert_eq!(refused.code, PatchCode::Ambiguous);
        assert!(
            refused.message.contains("lines 8, 9"),
            "{}",
            refused.message
        );
        let last = patch(json!([{"find": "print(", "replace": "log(", "occurrence": "last"}]))
            .expect("last");
        assert!(last.source.contains("print(total(rows))\nlog(\"done\")"));
        let all = patch(json!([{"find": "print(", "replace": "log(", "occurrence": "all"}]))
            .expect("all");
        assert_eq!(all.edits[0].matches, 2);
        assert!(!all.source.contains("print("));
        let second =
            patch(json!([{"find": "print(", "replace": "log(", "occurrence": 2}])).expect("second");
        assert!(second.source.contains("log(\"done\")"));
        let third = patch(json!([{"find": "print(", "replace": "log(", "occurrence": "3"}]))
            .expect_err("no third");
        assert_eq!(third.code, PatchCode::NoMatch);
    }

    #[test]
    fn one_failing_edit_aborts_the_whole_patch() {
        let refused = patch(json!([
            {"find": "SELECT n FROM t", "replace": "SELECT 1"},
            {"find": "not in the script", "replace": "x"},
        ]))
        .expect_err("no match");
        assert_eq!(refused.code, PatchCode::NoMatch);
        assert_eq!(refused.index, Some(1));
    }

    #[test]
    fn a_section_confines_the_anchor_to_one_function() {
        let refused = patch(json!([{"find": "rows", "replace": "items"}])).expect_err("ambiguous");
        assert_eq!(refused.code, PatchCode::Ambiguous);
        let patched = patch(json!([
            {"find": "for row in rows", "replace": "for row in rows[:10]", "section": "total"},
            {"op": "append", "section": "total", "text": "    # end of total\n"},
            {"op": "prepend", "text": "# A report.\n"},
        ]))
        .expect("patched");
        assert!(
            patched
                .source
                .starts_with("# A report.\ndef total(rows):\n")
        );
        assert!(
            patched
                .source
                .contains("    return sum\n    # end of total\n\nrows =")
        );
        assert_eq!(patched.edits[1].line, 6);
        let missing = patch(json!([{"find": "x", "replace": "y", "section": "nope"}]))
            .expect_err("no section");
        assert_eq!(missing.code, PatchCode::SectionNotFound);
    }

    #[test]
    fn patterns_are_regular_expressions() {
        let patched = patch(json!([{"pattern": "SELECT \\w+ FROM \\w+", "replace": "SELECT 2"}]))
            .expect("patched");
        assert!(patched.source.contains("platform.query(\"SELECT 2\")"));
        let bad = patch(json!([{"pattern": "(", "replace": "x"}])).expect_err("bad");
        assert_eq!(bad.code, PatchCode::BadPattern);
        // Short, but its program would be huge: refused, not compiled.
        let huge =
            patch(json!([{"pattern": "(?:\\w{100}){100}", "replace": "x"}])).expect_err("too big");
        assert_eq!(huge.code, PatchCode::BadPattern);
    }

    #[test]
    fn malformed_edits_are_refused_before_anything_applies() {
        for edits in [
            json!({}),
            json!([]),
            json!([{"replace": "x"}]),
            json!([{"find": "a", "pattern": "b", "replace": "x"}]),
            json!([{"find": "a"}]),
            json!([{"op": "move", "find": "a", "replace": "x"}]),
            json!([{"op": "append", "find": "a", "text": "x"}]),
            json!([{"find": "", "replace": "x"}]),
            json!([{"find": "a", "replace": "x", "occurrence": 0}]),
            json!([{"find": "a", "replace": "x", "line": 3}]),
        ] {
            let refused = patch(edits.clone()).expect_err("refused");
            assert_eq!(refused.code, PatchCode::BadEdit, "{edits}");
        }
    }

    #[test]
    fn the_result_is_held_to_the_size_limit() {
        let edits = parse_edits(&json!([{"op": "append", "text": "x = 1\n"}])).expect("edits");
        let refused = apply(SOURCE, &edits, SOURCE.len()).expect_err("too large");
        assert_eq!(refused.code, PatchCode::TooLarge);
    }

    #[test]
    fn a_replacement_for_every_match_is_sized_before_it_is_built() {
        let source = "x".repeat(1000);
        let replacement = "y".repeat(1 << 20);
        let edits =
            parse_edits(&json!([{"find": "x", "occurrence": "all", "replace": replacement}]))
                .expect("edits");
        let refused = apply(&source, &edits, 256 * 1024).expect_err("too large");
        assert_eq!(refused.code, PatchCode::TooLarge);
        // The size named is the one the result would have had: each of the 1000 one-byte
        // matches gives way to 1 MiB.
        assert!(
            refused
                .message
                .contains(&format!("{} bytes", 1000 * (1 << 20))),
            "{}",
            refused.message
        );
        // Shrinking replacements and insertions are summed the same way.
        let deleted = parse_edits(&json!([{"find": "x", "occurrence": "all", "replace": ""}]))
            .expect("edits");
        assert_eq!(apply(&source, &deleted, 0).expect("fits").source, "");
        let doubled = parse_edits(
            &json!([{"op": "insert_after", "find": "x", "occurrence": "all", "text": "x"}]),
        )
        .expect("edits");
        assert!(apply(&source, &doubled, 2000).is_ok());
        assert_eq!(
            apply(&source, &doubled, 1999)
                .expect_err("one byte over")
                .code,
            PatchCode::TooLarge
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Replacing a unique anchor and replacing it back gives the source
        /// again, and the report's line is where the replacement sits.
        #[test]
        fn a_unique_replace_round_trips(
            prefix in "[a-z \n]{0,40}",
            replacement in "[A-Z \n]{0,20}",
            suffix in "[a-z \n]{0,40}",
        ) {
            let source = format!("{prefix}@@anchor@@{suffix}");
            let there = apply(&source, &[Edit {
                op: EditOp::Replace,
                anchor: Some(Anchor::Find("@@anchor@@".into())),
                text: format!("<<{replacement}>>"),
                section: None,
                occurrence: Occurrence::Only,
            }], 1 << 20).expect("applies");
            prop_assert_eq!(there.edits[0].line, prefix.matches('\n').count() + 1);
            let back = apply(&there.source, &[Edit {
                op: EditOp::Replace,
                anchor: Some(Anchor::Find(format!("<<{replacement}>>"))),
                text: "@@anchor@@".into(),
                section: None,
                occurrence: Occurrence::Only,
            }], 1 << 20).expect("applies back");
            prop_assert_eq!(back.source, source);
        }

        /// Any JSON the grammar is given is either refused with a code or
        /// applies without panicking, and a refusal changes nothing.
        #[test]
        fn any_edit_list_applies_or_is_refused_with_a_code(
            find in "[a-z(\\[.*+?]{0,6}",
            text in "[a-z\n]{0,6}",
            op in prop::sample::select(vec!["replace", "insert_before", "insert_after", "append", "prepend", "bogus"]),
            occurrence in prop::sample::select(vec![json!(null), json!("first"), json!("last"), json!("all"), json!(2), json!("x")]),
            use_pattern in any::<bool>(),
            section in prop::option::of(prop::sample::select(vec!["total", "missing"])),
        ) {
            let mut edit = json!({"op": op, "text": text, "occurrence": occurrence});
            if !matches!(op, "append" | "prepend") {
                edit[if use_pattern { "pattern" } else { "find" }] = json!(find);
            }
            if let Some(section) = section {
                edit["section"] = json!(section);
            }
            match parse_edits(&json!([edit])).and_then(|edits| apply(SOURCE, &edits, 1 << 20)) {
                Ok(patched) => prop_assert_eq!(patched.edits.len(), 1),
                Err(refused) => prop_assert!(refused.code.as_str().starts_with("PATCH_")),
            }
        }
    }
}
