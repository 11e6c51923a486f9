//! What an exported response is stored as: its declared content type, or one
//! guessed from its first bytes, never a type a browser would render or run; and
//! the file extension that goes with it.

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::SNIFF_BYTES;

/// The declared content type of `headers` without parameters, lower case.
#[must_use]
pub fn declared_content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|value| value.trim().to_ascii_lowercase())
        .filter(|value| !value.is_empty())
}

/// Whether a content type is text a person or model can read inline.
#[must_use]
pub fn is_textual(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || content_type.ends_with("+json")
        || content_type.ends_with("+xml")
        || matches!(
            content_type,
            "application/json"
                | "application/x-ndjson"
                | "application/jsonl"
                | "application/xml"
                | "application/javascript"
                | "application/x-www-form-urlencoded"
                | "application/yaml"
                | "application/x-yaml"
                | "application/graphql-response+json"
        )
}

/// Types that a browser would render or run; a stored asset never carries them.
const ACTIVE_TYPES: &[&str] = &[
    "text/html",
    "application/xhtml+xml",
    "image/svg+xml",
    "text/javascript",
    "application/javascript",
    "text/jsx",
];

/// The content type an exported response is stored with: a specific declared type
/// wins; a missing or generic one (`application/octet-stream`, `text/plain`) is
/// guessed from the first bytes. Types a browser would render or run become
/// `text/plain`.
#[must_use]
pub fn stored_content_type(declared: Option<&str>, head: &[u8]) -> String {
    let chosen = match declared {
        Some(declared) if !matches!(declared, "application/octet-stream" | "text/plain") => {
            declared.to_owned()
        }
        _ => sniff(head)
            .map(str::to_owned)
            .or_else(|| declared.map(str::to_owned))
            .unwrap_or_else(|| "application/octet-stream".to_owned()),
    };
    if ACTIVE_TYPES.contains(&chosen.as_str()) {
        "text/plain".to_owned()
    } else {
        chosen
    }
}

/// Guesses a type from the first bytes: well-known binary signatures, then JSON,
/// JSON Lines and XML, then any UTF-8 text.
fn sniff(head: &[u8]) -> Option<&'static str> {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    let signatures: &[(&[u8], &str)] = &[
        (b"%PDF-", "application/pdf"),
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"GIF8", "image/gif"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
        (b"PAR1", "application/vnd.apache.parquet"),
    ];
    if let Some((_, content_type)) = signatures
        .iter()
        .find(|(signature, _)| head.starts_with(signature))
    {
        return Some(content_type);
    }
    // A cut in the middle of a UTF-8 sequence at the end of the sample is fine.
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        Err(error) if error.error_len().is_none() => {
            std::str::from_utf8(&head[..error.valid_up_to()]).ok()?
        }
        Err(_) => return None,
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let lines: Vec<&str> = trimmed
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        let complete = if text.len() < head.len() || head.len() == SNIFF_BYTES {
            // The last line may be cut off.
            &lines[..lines.len().saturating_sub(1)]
        } else {
            &lines[..]
        };
        if complete.len() > 1
            && complete
                .iter()
                .all(|line| serde_json::from_str::<Value>(line).is_ok())
        {
            return Some("application/x-ndjson");
        }
        return Some("application/json");
    }
    if trimmed.starts_with("<?xml") {
        return Some("application/xml");
    }
    if trimmed.starts_with('<') {
        // Possibly HTML: never stored as something a browser renders.
        return Some("text/plain");
    }
    Some("text/plain")
}

/// The file extension for a stored content type (`bin` when unknown).
#[must_use]
pub fn extension_for(content_type: &str) -> &'static str {
    match content_type {
        "application/json" | "application/graphql-response+json" => "json",
        "application/x-ndjson" | "application/jsonl" => "jsonl",
        "application/xml" | "text/xml" => "xml",
        "text/csv" => "csv",
        "text/tab-separated-values" => "tsv",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "application/yaml" | "application/x-yaml" => "yaml",
        "application/pdf" => "pdf",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/jpeg" => "jpg",
        "application/zip" => "zip",
        "application/gzip" => "gz",
        "application/vnd.apache.parquet" => "parquet",
        other if other.ends_with("+json") => "json",
        other if other.ends_with("+xml") => "xml",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_declared_or_sniffed_and_never_active() {
        assert_eq!(stored_content_type(Some("text/csv"), b"a,b"), "text/csv");
        assert_eq!(
            stored_content_type(None, b"  {\"a\": 1}"),
            "application/json"
        );
        assert_eq!(
            stored_content_type(Some("application/octet-stream"), b"{\"a\":1}\n{\"a\":2}\n"),
            "application/x-ndjson"
        );
        assert_eq!(stored_content_type(None, b"%PDF-1.7"), "application/pdf");
        assert_eq!(stored_content_type(None, b"<html>"), "text/plain");
        assert_eq!(
            stored_content_type(Some("text/html"), b"<html>"),
            "text/plain"
        );
        assert_eq!(
            stored_content_type(None, &[0, 159, 146, 150]),
            "application/octet-stream"
        );
        assert_eq!(extension_for("application/x-ndjson"), "jsonl");
        assert_eq!(extension_for("application/x-unknown"), "bin");
    }
}
