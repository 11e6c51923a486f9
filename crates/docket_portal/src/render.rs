//! A tool's structured answer as HTML: an object as a list of its fields, a
//! list of objects as a table, anything else as text. Every text is escaped
//! here; the pages include the result as it is. What the answer holds is
//! bounded on the way (depth, items, columns, characters), so a huge answer
//! makes a long page, never an unbounded one.

use serde_json::Value;

/// How deep objects and lists are shown before the rest is JSON text.
const MAX_DEPTH: usize = 4;

/// The most items of a list, or fields of an object, shown.
const MAX_ITEMS: usize = 200;

/// The most columns a table shows.
const MAX_COLUMNS: usize = 24;

/// The most characters of one text shown.
const MAX_CHARS: usize = 2_000;

/// `text` escaped for HTML text and attribute values.
#[must_use]
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// `text` cut at [`MAX_CHARS`] characters, saying so.
fn clipped(text: &str) -> String {
    match text.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}… ({} more bytes)", &text[..at], text.len() - at),
        None => text.to_owned(),
    }
}

/// `value` as HTML.
#[must_use]
pub fn html(value: &Value) -> String {
    let mut out = String::new();
    block(value, 0, &mut out);
    out
}

fn block(value: &Value, depth: usize, out: &mut String) {
    if depth >= MAX_DEPTH {
        return inline(value, out);
    }
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            out.push_str("<dl>");
            for (key, field) in fields.iter().take(MAX_ITEMS) {
                out.push_str("<dt>");
                out.push_str(&escape(&clipped(key)));
                out.push_str("</dt><dd>");
                block(field, depth + 1, out);
                out.push_str("</dd>");
            }
            out.push_str("</dl>");
        }
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
            table(items, out);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push_str("<ul>");
            for item in items.iter().take(MAX_ITEMS) {
                out.push_str("<li>");
                block(item, depth + 1, out);
                out.push_str("</li>");
            }
            out.push_str("</ul>");
            more(items.len(), out);
        }
        Value::String(text) if text.contains('\n') => {
            out.push_str("<pre>");
            out.push_str(&escape(&clipped(text)));
            out.push_str("</pre>");
        }
        other => inline(other, out),
    }
}

/// A list of objects: a column per key, in the order keys first appear.
fn table(items: &[Value], out: &mut String) {
    let mut columns: Vec<&str> = Vec::new();
    for item in items.iter().take(MAX_ITEMS) {
        for key in item
            .as_object()
            .into_iter()
            .flat_map(|fields| fields.keys())
        {
            if columns.len() < MAX_COLUMNS && !columns.contains(&key.as_str()) {
                columns.push(key);
            }
        }
    }
    out.push_str("<table><thead><tr>");
    for column in &columns {
        out.push_str("<th>");
        out.push_str(&escape(&clipped(column)));
        out.push_str("</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for item in items.iter().take(MAX_ITEMS) {
        out.push_str("<tr>");
        for column in &columns {
            out.push_str("<td>");
            if let Some(cell) = item.get(*column) {
                inline(cell, out);
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    more(items.len(), out);
}

fn more(count: usize, out: &mut String) {
    if count > MAX_ITEMS {
        out.push_str(&format!(
            "<p class=\"note\">… and {} more</p>",
            count - MAX_ITEMS
        ));
    }
}

/// One value on one line: a string as it is, anything else as JSON.
fn inline(value: &Value, out: &mut String) {
    let text = match value {
        Value::String(text) => clipped(text),
        Value::Null => String::new(),
        other => clipped(&other.to_string()),
    };
    out.push_str(&escape(&text));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_of_objects_are_tables_and_text_is_escaped() {
        let page = html(&json!({"runs": [{"id": "r1", "status": "<b>"}, {"id": "r2", "x": 1}]}));
        assert!(
            page.contains("<th>id</th><th>status</th><th>x</th>"),
            "{page}"
        );
        assert!(page.contains("<td>&lt;b&gt;</td>"), "{page}");
        assert!(!page.contains("<b>"), "{page}");
    }

    #[test]
    fn long_lists_and_texts_are_bounded() {
        let items: Vec<Value> = (0..1000).map(|i| json!(i)).collect();
        let page = html(&json!(items));
        assert!(page.contains("and 800 more"), "{page}");
        let long = "x".repeat(10_000);
        assert!(html(&json!(long)).len() < 3_000);
    }
}
