//! Pagination hints: where a response says its next page is (a `Link` header with
//! `rel="next"`, or the common cursor fields of a JSON body). Reported, never
//! followed.

use reqwest::header::HeaderMap;
use serde_json::Value;

/// Where a response says the next page is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaginationHint {
    /// Whether the response says more exists.
    pub has_more: bool,
    /// The next page's URL (from `Link: <…>; rel="next"` or a body field).
    pub next_url: Option<String>,
    /// An opaque cursor for the next page, from a body field.
    pub next_cursor: Option<String>,
    /// Where it was found: `link_header`, or the body field's dotted path.
    pub source: String,
}

/// Cursor fields looked for at the body's top level and under the usual
/// envelopes (`meta`, `pagination`, `paging`, `page_info`, `pageInfo`, `links`).
const CURSOR_FIELDS: &[&str] = &[
    "next_cursor",
    "nextCursor",
    "next_page_token",
    "nextPageToken",
    "endCursor",
    "end_cursor",
    "cursor",
];
const NEXT_URL_FIELDS: &[&str] = &[
    "@odata.nextLink",
    "next_url",
    "nextUrl",
    "next",
    "next_page_url",
];
const MORE_FIELDS: &[&str] = &["has_more", "hasMore", "hasNextPage", "has_next_page"];
const ENVELOPES: &[&str] = &[
    "",
    "meta",
    "pagination",
    "paging",
    "page_info",
    "pageInfo",
    "links",
];

/// Reports where the next page is, from a `Link` header with `rel="next"` or from
/// the common cursor fields of a JSON body. It never follows anything.
#[must_use]
pub fn pagination_hint(headers: &HeaderMap, body: Option<&Value>) -> Option<PaginationHint> {
    for value in headers.get_all(reqwest::header::LINK) {
        if let Ok(text) = value.to_str()
            && let Some(url) = link_next(text)
        {
            return Some(PaginationHint {
                has_more: true,
                next_url: Some(url),
                next_cursor: None,
                source: "link_header".into(),
            });
        }
    }
    let body = body?;
    for envelope in ENVELOPES {
        let object = if envelope.is_empty() {
            body.as_object()
        } else {
            body.get(envelope).and_then(Value::as_object)
        };
        let Some(object) = object else { continue };
        let prefix = if envelope.is_empty() {
            String::new()
        } else {
            format!("{envelope}.")
        };
        let more = MORE_FIELDS
            .iter()
            .find_map(|field| object.get(*field).and_then(Value::as_bool));
        let cursor = CURSOR_FIELDS.iter().find_map(|field| {
            object
                .get(*field)
                .and_then(Value::as_str)
                .filter(|cursor| !cursor.is_empty())
                .map(|cursor| (*field, cursor.to_owned()))
        });
        let next_url = NEXT_URL_FIELDS.iter().find_map(|field| {
            object
                .get(*field)
                .and_then(Value::as_str)
                .filter(|url| {
                    url.starts_with("http://")
                        || url.starts_with("https://")
                        || url.starts_with('/')
                })
                .map(|url| (*field, url.to_owned()))
        });
        if more == Some(false) && cursor.is_none() && next_url.is_none() {
            continue;
        }
        if cursor.is_none() && next_url.is_none() {
            continue;
        }
        let source = cursor
            .as_ref()
            .or(next_url.as_ref())
            .map(|(field, _)| format!("{prefix}{field}"))
            .unwrap_or_default();
        return Some(PaginationHint {
            has_more: more.unwrap_or(true),
            next_url: next_url.map(|(_, url)| url),
            next_cursor: cursor.map(|(_, cursor)| cursor),
            source,
        });
    }
    None
}

/// The URL of the `rel="next"` entry of a `Link` header (RFC 8288).
fn link_next(header: &str) -> Option<String> {
    for entry in header.split(',') {
        let mut parts = entry.split(';');
        let target = parts.next()?.trim();
        let url = target.strip_prefix('<')?.strip_suffix('>')?;
        let is_next = parts.any(|parameter| {
            let Some((name, value)) = parameter.split_once('=') else {
                return false;
            };
            name.trim().eq_ignore_ascii_case("rel")
                && value
                    .trim()
                    .trim_matches('"')
                    .split_ascii_whitespace()
                    .any(|rel| rel.eq_ignore_ascii_case("next"))
        });
        if is_next {
            return Some(url.to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;
    use serde_json::json;

    use super::*;

    #[test]
    fn pagination_hints_come_from_link_headers_and_cursor_fields() {
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::LINK,
            HeaderValue::from_static(
                "<https://api.example/items?page=1>; rel=\"prev\", <https://api.example/items?page=3>; rel=\"next\"",
            ),
        );
        let hint = pagination_hint(&headers, None).expect("hint");
        assert_eq!(
            hint.next_url.as_deref(),
            Some("https://api.example/items?page=3")
        );
        assert_eq!(hint.source, "link_header");

        let empty = HeaderMap::new();
        let hint = pagination_hint(&empty, Some(&json!({"items": [], "next_cursor": "abc"})))
            .expect("hint");
        assert_eq!(hint.next_cursor.as_deref(), Some("abc"));
        assert!(hint.has_more);
        let hint = pagination_hint(
            &empty,
            Some(&json!({"meta": {"hasMore": true, "nextCursor": "c2"}})),
        )
        .expect("hint");
        assert_eq!(
            (hint.next_cursor.as_deref(), hint.source.as_str()),
            (Some("c2"), "meta.nextCursor")
        );
        let hint = pagination_hint(
            &empty,
            Some(&json!({"@odata.nextLink": "https://x/y?$skip=2"})),
        )
        .expect("hint");
        assert_eq!(hint.next_url.as_deref(), Some("https://x/y?$skip=2"));
        assert_eq!(pagination_hint(&empty, Some(&json!({"items": [1]}))), None);
        assert_eq!(
            pagination_hint(&empty, Some(&json!({"has_more": false}))),
            None
        );
    }
}
