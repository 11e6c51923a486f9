//! A script's outline: its top-level statements (functions among them) with
//! the lines they span, read by a small line scanner rather than the parser,
//! so a script that does not parse yet (one being patched into shape) still
//! has an outline.
//!
//! A top-level statement starts on a line that begins in column 0, outside
//! any bracket or triple-quoted string, and is not blank or a comment; it
//! ends on the last non-blank line before the next one. `elif`, `else`
//! lines belong to the `if` above them.

/// What kind of top-level statement an [`OutlineItem`] is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutlineKind {
    /// `def name(...):` — a function, addressable as a patch `section`.
    Function,
    /// `name = ...` (or `name += ...`, `a, b = ...`).
    Assignment,
    /// `for ...:`.
    Loop,
    /// `if ...:` with its `elif` and `else`.
    Conditional,
    /// Anything else: a call such as `platform.export(...)`, a `return`.
    Expression,
}

impl OutlineKind {
    /// Its name in answers.
    pub fn as_str(self) -> &'static str {
        match self {
            OutlineKind::Function => "function",
            OutlineKind::Assignment => "assignment",
            OutlineKind::Loop => "for",
            OutlineKind::Conditional => "if",
            OutlineKind::Expression => "expression",
        }
    }
}

/// One top-level statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutlineItem {
    /// What it is.
    pub kind: OutlineKind,
    /// The function's or the assigned variable's name; for other statements
    /// their first line, trimmed.
    pub name: String,
    /// The 1-based line it starts on.
    pub line: usize,
    /// The 1-based line it ends on.
    pub end_line: usize,
    /// The byte offset it starts at.
    pub start: usize,
    /// The byte offset just past its last line (its newline included).
    pub end: usize,
}

/// The longest `name` of a statement that is neither a function nor an
/// assignment, in characters.
const PREVIEW_CHARS: usize = 80;

/// The scanner's state between lines.
#[derive(Clone, Copy, Debug, Default)]
struct Scan {
    /// Open brackets.
    depth: usize,
    /// Inside a triple-quoted string opened with this quote byte.
    triple: Option<u8>,
}

impl Scan {
    /// Whether a line starting in this state can start a statement.
    fn at_top(self) -> bool {
        self.depth == 0 && self.triple.is_none()
    }

    /// Moves the state over one line (without its newline).
    fn over(&mut self, line: &[u8]) {
        let mut index = 0;
        while let Some(&byte) = line.get(index) {
            if let Some(quote) = self.triple {
                if byte == b'\\' {
                    index += 2;
                    continue;
                }
                if byte == quote
                    && line.get(index + 1) == Some(&quote)
                    && line.get(index + 2) == Some(&quote)
                {
                    self.triple = None;
                    index += 3;
                    continue;
                }
                index += 1;
                continue;
            }
            match byte {
                b'#' => return,
                b'\'' | b'"' => {
                    if line.get(index + 1) == Some(&byte) && line.get(index + 2) == Some(&byte) {
                        self.triple = Some(byte);
                        index += 3;
                        continue;
                    }
                    // A one-line string: skip to its closing quote (or the line's end).
                    index += 1;
                    while let Some(&inner) = line.get(index) {
                        if inner == b'\\' {
                            index += 2;
                            continue;
                        }
                        index += 1;
                        if inner == byte {
                            break;
                        }
                    }
                    continue;
                }
                b'(' | b'[' | b'{' => self.depth += 1,
                b')' | b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
            index += 1;
        }
    }
}

/// Whether a line continues the statement above it even at the top level.
fn continues(line: &str) -> bool {
    let first = line
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .next();
    matches!(first, Some("elif" | "else"))
}

/// The outline of `source`: its top-level statements, in order.
pub fn outline(source: &str) -> Vec<OutlineItem> {
    let mut items: Vec<OutlineItem> = Vec::new();
    let mut scan = Scan::default();
    let mut offset = 0;
    for (index, raw) in source.split_inclusive('\n').enumerate() {
        let line_number = index + 1;
        let line = raw.trim_end_matches(['\n', '\r']);
        let starts = scan.at_top()
            && !line.is_empty()
            && !line.starts_with([' ', '\t', '#'])
            && !continues(line);
        let blank = line.trim().is_empty() || line.trim_start().starts_with('#');
        if starts {
            items.push(OutlineItem {
                kind: kind_of(line),
                name: name_of(line),
                line: line_number,
                end_line: line_number,
                start: offset,
                end: offset + raw.len(),
            });
        } else if (!blank || !scan.at_top())
            && let Some(last) = items.last_mut()
        {
            last.end_line = line_number;
            last.end = offset + raw.len();
        }
        scan.over(line.as_bytes());
        offset += raw.len();
    }
    items
}

/// The top-level function `name`, when the source defines one.
pub fn function(source: &str, name: &str) -> Option<OutlineItem> {
    outline(source)
        .into_iter()
        .find(|item| item.kind == OutlineKind::Function && item.name == name)
}

fn first_word(line: &str) -> &str {
    line.split(|c: char| !c.is_alphanumeric() && c != '_')
        .next()
        .unwrap_or_default()
}

fn kind_of(line: &str) -> OutlineKind {
    match first_word(line) {
        "def" => OutlineKind::Function,
        "for" => OutlineKind::Loop,
        "if" => OutlineKind::Conditional,
        _ if assigned_name(line).is_some() => OutlineKind::Assignment,
        _ => OutlineKind::Expression,
    }
}

/// The name(s) an assignment line assigns: the text before its `=` when that
/// is a plain target list (`total`, `a, b`, `total +=`).
fn assigned_name(line: &str) -> Option<&str> {
    let equals = line.find('=')?;
    let before = line.get(..equals)?;
    if line
        .get(equals + 1..)
        .is_some_and(|rest| rest.starts_with('='))
    {
        return None;
    }
    let target = before
        .trim_end()
        .trim_end_matches(['+', '-', '*', '/', '%', '|', '&', '^'])
        .trim_end();
    let plain = !target.is_empty()
        && target
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | ',' | ' '));
    plain.then_some(target)
}

fn name_of(line: &str) -> String {
    if first_word(line) == "def" {
        let rest = line.get(3..).unwrap_or_default().trim_start();
        let end = rest
            .find(|c: char| !c.is_alphanumeric() && c != '_')
            .unwrap_or(rest.len());
        return rest.get(..end).unwrap_or_default().to_owned();
    }
    if !matches!(first_word(line), "for" | "if")
        && let Some(target) = assigned_name(line)
    {
        return target.to_owned();
    }
    line.trim().chars().take(PREVIEW_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SCRIPT: &str = "\
# A report.
rows = platform.query(\"SELECT 1\")[\"rows\"]

def total(rows):
    \"\"\"Sums.

    def not_a_function():
    \"\"\"
    sum = 0
    for row in rows:
        sum += row[\"n\"]

    return sum

if len(rows) > 0:
    print(total(rows))
else:
    print(\"none\")
query = {
    \"a\": 1,
}
platform.export(\"out\", rows, \"csv\")
";

    #[test]
    fn lists_functions_and_statements_with_their_lines() {
        let items = outline(SCRIPT);
        let summary: Vec<(&str, &str, usize, usize)> = items
            .iter()
            .map(|item| {
                (
                    item.kind.as_str(),
                    item.name.as_str(),
                    item.line,
                    item.end_line,
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                ("assignment", "rows", 2, 2),
                ("function", "total", 4, 13),
                ("if", "if len(rows) > 0:", 15, 18),
                ("assignment", "query", 19, 21),
                (
                    "expression",
                    "platform.export(\"out\", rows, \"csv\")",
                    22,
                    22
                ),
            ]
        );
        let total = function(SCRIPT, "total").expect("total");
        let body = SCRIPT.get(total.start..total.end).expect("span");
        assert!(body.starts_with("def total(rows):\n"));
        assert!(body.ends_with("    return sum\n"));
        assert_eq!(function(SCRIPT, "not_a_function"), None);
    }

    #[test]
    fn comparisons_are_not_assignments() {
        assert_eq!(kind_of("x == 1"), OutlineKind::Expression);
        assert_eq!(kind_of("total += 1"), OutlineKind::Assignment);
        assert_eq!(name_of("a, b = 1, 2"), "a, b");
        assert_eq!(kind_of("print(x=1)"), OutlineKind::Expression);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Any text has an outline whose items are in order, inside the text,
        /// on character boundaries, and never overlap.
        #[test]
        fn any_text_outlines_into_ordered_spans(source in "[a-z_ =():\\[\\]{}\"'#\n\t]{0,200}") {
            let items = outline(&source);
            let mut previous_end = 0;
            for item in &items {
                prop_assert!(item.start >= previous_end);
                prop_assert!(item.start < item.end);
                prop_assert!(item.end <= source.len());
                prop_assert!(source.get(item.start..item.end).is_some());
                prop_assert!(item.line <= item.end_line);
                previous_end = item.end;
            }
        }
    }
}
