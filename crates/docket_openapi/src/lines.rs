//! The line of a location, found in a document's text for error messages. It is
//! best effort: JSON is scanned token by token (the document has parsed, so the
//! scan can be simple), block-style YAML is read by its indentation, and when a
//! location cannot be found exactly the line of its nearest found ancestor is
//! given. `None` means not even the first step was found.

use crate::pointer::{Pointer, Segment};
use crate::source::{Format, Source};

/// The line (from 1) of `pointer` in the document's text.
pub(crate) fn line_of(source: Source<'_>, pointer: &Pointer) -> Option<usize> {
    let target = pointer.segments();
    if target.is_empty() {
        return None;
    }
    match source.format {
        Format::Json => json_line(source.text, target),
        Format::Yaml => yaml_line(source.text, target),
    }
}

/// One open container of the JSON scan, with the member being read.
enum Frame {
    Object { key: Option<String> },
    Array { index: usize, awaiting_value: bool },
}

fn json_line(text: &str, target: &[Segment]) -> Option<usize> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut best: Option<(usize, usize)> = None;
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(character) = chars.next() {
        if character == '\n' {
            line += 1;
            continue;
        }
        if character.is_whitespace() {
            continue;
        }
        // A value starting inside an array is that array's next element.
        if let Some(Frame::Array {
            awaiting_value: awaiting_value @ true,
            ..
        }) = frames.last_mut()
            && character != ']'
        {
            *awaiting_value = false;
            if let Some(matched) = matched_depth(&frames, target) {
                if matched == target.len() {
                    return Some(line);
                }
                if best.is_none_or(|(depth, _)| matched > depth) {
                    best = Some((matched, line));
                }
            }
        }
        match character {
            '{' => frames.push(Frame::Object { key: None }),
            '[' => frames.push(Frame::Array {
                index: 0,
                awaiting_value: true,
            }),
            '}' | ']' => {
                frames.pop();
            }
            ',' => match frames.last_mut() {
                Some(Frame::Array {
                    index,
                    awaiting_value,
                }) => {
                    *index += 1;
                    *awaiting_value = true;
                }
                Some(Frame::Object { key }) => *key = None,
                None => {}
            },
            '"' => {
                let (text, newlines) = json_string(&mut chars);
                let is_key = matches!(frames.last(), Some(Frame::Object { key: None }));
                if is_key {
                    if let Some(Frame::Object { key }) = frames.last_mut() {
                        *key = Some(text);
                    }
                    if let Some(matched) = matched_depth(&frames, target) {
                        if matched == target.len() {
                            return Some(line);
                        }
                        if best.is_none_or(|(depth, _)| matched > depth) {
                            best = Some((matched, line));
                        }
                    }
                }
                line += newlines;
            }
            _ => {}
        }
    }
    best.map(|(_, line)| line)
}

/// How many steps of `target` the open frames follow, when they follow it without
/// a detour; `None` when they have left its path.
fn matched_depth(frames: &[Frame], target: &[Segment]) -> Option<usize> {
    if frames.len() > target.len() {
        return None;
    }
    for (frame, segment) in frames.iter().zip(target) {
        let same = match (frame, segment) {
            (Frame::Object { key: Some(key) }, Segment::Key(wanted)) => key == wanted,
            (Frame::Array { index, .. }, Segment::Index(wanted)) => index == wanted,
            _ => false,
        };
        if !same {
            return None;
        }
    }
    Some(frames.len())
}

/// A JSON string's text after its opening quote, and the line breaks inside it
/// (none in valid JSON, but the count keeps the scan honest).
fn json_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> (String, usize) {
    let mut text = String::new();
    let mut newlines = 0;
    while let Some(character) = chars.next() {
        match character {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => text.push('\n'),
                Some('t') => text.push('\t'),
                Some('r') => text.push('\r'),
                Some('b') => text.push('\u{8}'),
                Some('f') => text.push('\u{c}'),
                Some('u') => {
                    let digits: String = chars.by_ref().take(4).collect();
                    let unit = u32::from_str_radix(&digits, 16).unwrap_or(0xfffd);
                    // Surrogate pairs are not joined: a key written with them is not
                    // found, and the ancestor's line is given instead.
                    text.push(char::from_u32(unit).unwrap_or('\u{fffd}'));
                }
                Some(other) => text.push(other),
                None => break,
            },
            '\n' => {
                newlines += 1;
                text.push('\n');
            }
            other => text.push(other),
        }
    }
    (text, newlines)
}

/// A range of lines, `start..end`, that holds one YAML node.
#[derive(Clone, Copy)]
struct Block {
    start: usize,
    end: usize,
}

/// One meaningful YAML line: where its text starts, and where its key starts
/// after any `- ` sequence markers.
struct Entry<'a> {
    indent: usize,
    column: usize,
    dashes: usize,
    rest: &'a str,
}

fn entry(line: &str) -> Option<Entry<'_>> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let mut rest = &line[indent..];
    let trimmed = rest.trim_end();
    if trimmed.is_empty()
        || trimmed.starts_with('#')
        || trimmed.starts_with('%')
        || trimmed == "---"
        || trimmed == "..."
    {
        return None;
    }
    let mut column = indent;
    let mut dashes = 0;
    while let Some(after) = rest.strip_prefix('-') {
        if !(after.is_empty() || after.starts_with(' ')) {
            break;
        }
        let spaces = after.len() - after.trim_start_matches(' ').len();
        column += 1 + spaces;
        rest = &after[spaces..];
        dashes += 1;
    }
    Some(Entry {
        indent,
        column,
        dashes,
        rest,
    })
}

/// The key a line's text starts with: plain, `'single'` or `"double"` quoted.
fn key_of(rest: &str) -> Option<String> {
    let (key, after) = if let Some(quoted) = rest.strip_prefix('"') {
        let mut key = String::new();
        let mut chars = quoted.char_indices();
        let mut end = None;
        while let Some((position, character)) = chars.next() {
            match character {
                '"' => {
                    end = Some(position + 1);
                    break;
                }
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        key.push(escaped);
                    }
                }
                other => key.push(other),
            }
        }
        (key, &quoted[end?..])
    } else if let Some(quoted) = rest.strip_prefix('\'') {
        let mut key = String::new();
        let mut chars = quoted.char_indices().peekable();
        let mut end = None;
        while let Some((position, character)) = chars.next() {
            if character == '\'' {
                if chars.peek().is_some_and(|(_, next)| *next == '\'') {
                    chars.next();
                    key.push('\'');
                    continue;
                }
                end = Some(position + 1);
                break;
            }
            key.push(character);
        }
        (key, &quoted[end?..])
    } else {
        let colon = rest.find(": ").or_else(|| {
            rest.trim_end()
                .ends_with(':')
                .then(|| rest.trim_end().len() - 1)
        })?;
        (rest[..colon].trim_end().to_owned(), &rest[colon..])
    };
    after.trim_start().starts_with(':').then_some(key)
}

fn yaml_line(text: &str, target: &[Segment]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut block = Block {
        start: 0,
        end: lines.len(),
    };
    let mut found = None;
    for segment in target {
        let step = match segment {
            Segment::Key(key) => yaml_key(&lines, block, key),
            Segment::Index(index) => yaml_item(&lines, block, *index),
        };
        let Some((line, inner)) = step else { break };
        found = Some(line + 1);
        block = inner;
    }
    found
}

/// The line of `key` among the keys of the mapping in `block`, and the block of its value.
fn yaml_key(lines: &[&str], block: Block, key: &str) -> Option<(usize, Block)> {
    let column =
        (block.start..block.end).find_map(|line| entry(lines[line]).map(|entry| entry.column))?;
    for line in block.start..block.end {
        let Some(found) = entry(lines[line]) else {
            continue;
        };
        if found.column != column || key_of(found.rest).as_deref() != Some(key) {
            continue;
        }
        // The value is on the lines indented deeper, or a sequence at the key's own
        // indentation (`parameters:` then `- name: id`).
        let end = (line + 1..block.end)
            .find(|next| {
                entry(lines[*next]).is_some_and(|after| {
                    after.indent < column || (after.indent == column && after.dashes == 0)
                })
            })
            .unwrap_or(block.end);
        return Some((
            line,
            Block {
                start: line + 1,
                end,
            },
        ));
    }
    None
}

/// The line of item `index` of the sequence in `block`, and the block of that item
/// (which starts on the item's own line, after its `- `).
fn yaml_item(lines: &[&str], block: Block, index: usize) -> Option<(usize, Block)> {
    let first = (block.start..block.end).find_map(|line| entry(lines[line]))?;
    if first.dashes == 0 {
        return None;
    }
    let dash_indent = first.indent;
    let items: Vec<usize> = (block.start..block.end)
        .filter(|line| {
            entry(lines[*line]).is_some_and(|found| found.indent == dash_indent && found.dashes > 0)
        })
        .collect();
    let line = *items.get(index)?;
    let end = (line + 1..block.end)
        .find(|next| entry(lines[*next]).is_some_and(|after| after.indent <= dash_indent))
        .unwrap_or(block.end);
    Some((line, Block { start: line, end }))
}
