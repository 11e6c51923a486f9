//! SQL text for `telemetry.capture_statements`: the statement's shape without its values.

/// The most bytes a scrubbed statement has.
pub const MAX_STATEMENT_BYTES: usize = 2048;

/// What ends a statement cut at [`MAX_STATEMENT_BYTES`].
const ELLIPSIS: &str = "...";

/// `sql` with every string literal (`'...'`, `E'...'`, `X'...'`, dollar-quoted `$$...$$`) and
/// number literal replaced by `?`, comments removed and runs of whitespace made one space,
/// cut to at most [`MAX_STATEMENT_BYTES`] bytes. Quoted identifiers (`"name"`) are kept: they
/// are the statement's shape, not its values. An unterminated literal hides the rest.
pub fn scrub_statement(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len().min(MAX_STATEMENT_BYTES));
    let chars: Vec<char> = sql.chars().collect();
    let mut index = 0;
    let mut previous_word = false;
    while index < chars.len() && out.len() <= MAX_STATEMENT_BYTES {
        let current = chars[index];
        let next = chars.get(index + 1).copied();
        match current {
            '\'' => {
                // A prefix letter (E, X, B, N, U&) was written as part of a word; drop it.
                if previous_word
                    && out.chars().last().is_some_and(|last| {
                        matches!(last, 'e' | 'E' | 'x' | 'X' | 'b' | 'B' | 'n' | 'N')
                    })
                    && !out
                        .chars()
                        .rev()
                        .nth(1)
                        .is_some_and(|before| before.is_alphanumeric() || before == '_')
                {
                    out.pop();
                }
                index = skip_quoted(&chars, index);
                out.push('?');
                previous_word = false;
            }
            '"' => {
                let end = skip_quoted(&chars, index);
                out.extend(&chars[index..end]);
                index = end;
                previous_word = false;
            }
            '-' if next == Some('-') => {
                while index < chars.len() && chars[index] != '\n' {
                    index += 1;
                }
                push_space(&mut out);
            }
            '/' if next == Some('*') => {
                index += 2;
                while index < chars.len()
                    && !(chars[index] == '*' && chars.get(index + 1) == Some(&'/'))
                {
                    index += 1;
                }
                index = (index + 2).min(chars.len());
                push_space(&mut out);
                previous_word = false;
            }
            '$' if !previous_word => match dollar_tag(&chars, index) {
                Some(tag) => {
                    index = skip_dollar_quoted(&chars, index, &tag);
                    out.push('?');
                }
                None => {
                    // `$1`: a parameter placeholder, kept.
                    out.push('$');
                    index += 1;
                    while index < chars.len() && chars[index].is_ascii_digit() {
                        out.push(chars[index]);
                        index += 1;
                    }
                }
            },
            digit if digit.is_ascii_digit() && !previous_word => {
                index = skip_number(&chars, index);
                out.push('?');
            }
            '.' if !previous_word && next.is_some_and(|next| next.is_ascii_digit()) => {
                index = skip_number(&chars, index);
                out.push('?');
            }
            space if space.is_whitespace() => {
                push_space(&mut out);
                index += 1;
                previous_word = false;
            }
            other => {
                out.push(other);
                previous_word = other.is_alphanumeric() || other == '_' || other == '$';
                index += 1;
            }
        }
    }
    let trimmed = out.trim();
    if trimmed.len() <= MAX_STATEMENT_BYTES && index >= chars.len() {
        return trimmed.to_owned();
    }
    let mut cut = MAX_STATEMENT_BYTES - ELLIPSIS.len();
    while !trimmed.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{ELLIPSIS}", &trimmed[..cut.min(trimmed.len())])
}

fn push_space(out: &mut String) {
    if !out.is_empty() && !out.ends_with(' ') {
        out.push(' ');
    }
}

/// The index after the quoted run that starts at `start` (its quote doubled inside is an
/// escaped quote; a backslash escapes the next character, as `E'...'` strings allow).
fn skip_quoted(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut index = start + 1;
    while index < chars.len() {
        if chars[index] == '\\' && quote == '\'' {
            index += 2;
            continue;
        }
        if chars[index] == quote {
            if chars.get(index + 1) == Some(&quote) {
                index += 2;
                continue;
            }
            return index + 1;
        }
        index += 1;
    }
    chars.len()
}

/// `$tag$` at `start`, when one starts there.
fn dollar_tag(chars: &[char], start: usize) -> Option<String> {
    let mut index = start + 1;
    while index < chars.len() && (chars[index].is_alphanumeric() || chars[index] == '_') {
        if index == start + 1 && chars[index].is_ascii_digit() {
            return None;
        }
        index += 1;
    }
    (chars.get(index) == Some(&'$')).then(|| chars[start..=index].iter().collect())
}

fn skip_dollar_quoted(chars: &[char], start: usize, tag: &str) -> usize {
    let tag: Vec<char> = tag.chars().collect();
    let mut index = start + tag.len();
    while index + tag.len() <= chars.len() {
        if chars[index..index + tag.len()] == tag[..] {
            return index + tag.len();
        }
        index += 1;
    }
    chars.len()
}

fn skip_number(chars: &[char], start: usize) -> usize {
    let mut index = start;
    while index < chars.len() {
        let current = chars[index];
        let exponent_sign =
            matches!(current, '+' | '-') && index > start && matches!(chars[index - 1], 'e' | 'E');
        if current.is_ascii_alphanumeric() || current == '.' || current == '_' || exponent_sign {
            index += 1;
        } else {
            break;
        }
    }
    index
}
