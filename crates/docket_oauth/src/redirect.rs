//! Redirect-URI rules: which URIs a client may register, and whether the URI
//! of a request is one it registered.
//!
//! - A `web` client registers https URIs that match one of the operator's
//!   patterns, where `*` matches within one host label or one path segment.
//! - A `native` client registers loopback URIs (`http://127.0.0.1`,
//!   `http://[::1]`, `http://localhost`; the port is chosen when it is used,
//!   RFC 8252 §7.3) or private-use schemes (`com.example.app:/callback`).
//! - At `/authorize` and `/token` the URI must equal a registered one byte for
//!   byte, except a loopback URI's port.

use reqwest::Url;

/// The most redirect URIs a client registers.
pub const MAX_REDIRECT_URIS: usize = 10;

/// The most bytes of one redirect URI.
pub const MAX_REDIRECT_URI_BYTES: usize = 2000;

/// Schemes that are never a private-use scheme.
const NOT_PRIVATE_USE: [&str; 12] = [
    "http",
    "https",
    "javascript",
    "data",
    "file",
    "vbscript",
    "about",
    "blob",
    "ftp",
    "ws",
    "wss",
    "filesystem",
];

/// Checks an operator's pattern for web clients' redirect URIs.
///
/// # Errors
/// Why it is not a usable pattern.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    let Some(rest) = pattern.strip_prefix("https://") else {
        return Err("a redirect URI pattern starts with https://".to_owned());
    };
    if pattern.contains('#') {
        return Err("a redirect URI pattern has no fragment".to_owned());
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.is_empty() || authority.starts_with('*') && authority.len() == 1 {
        return Err("a redirect URI pattern names a host (a label may be *)".to_owned());
    }
    if authority.contains('@') {
        return Err("a redirect URI pattern has no user name".to_owned());
    }
    if authority
        .split_once(':')
        .is_some_and(|(_, port)| port.contains('*'))
    {
        return Err("a redirect URI pattern's port is not a wildcard".to_owned());
    }
    if path
        .split_once('?')
        .is_some_and(|(_, query)| query.contains('*'))
    {
        return Err("a redirect URI pattern's query is not a wildcard".to_owned());
    }
    let example = pattern.replace('*', "x");
    Url::parse(&example).map_err(|_| "a redirect URI pattern is an absolute URL".to_owned())?;
    Ok(())
}

/// Whether `uri` matches `pattern` (see [`check_pattern`]): the same text,
/// where each `*` stands for one or more characters of a host label or zero or
/// more of a path segment.
#[must_use]
pub fn matches_pattern(pattern: &str, uri: &str) -> bool {
    if check_web(uri).is_err() {
        return false;
    }
    let (Some(pattern), Some(uri)) = (
        pattern.strip_prefix("https://"),
        uri.strip_prefix("https://"),
    ) else {
        return false;
    };
    let split = |text: &'_ str| -> (String, String) {
        let at = text.find(['/', '?']).unwrap_or(text.len());
        (text[..at].to_ascii_lowercase(), text[at..].to_owned())
    };
    let (pattern_authority, pattern_path) = split(pattern);
    let (uri_authority, uri_path) = split(uri);
    glob(
        pattern_authority.as_bytes(),
        uri_authority.as_bytes(),
        b".:",
        1,
    ) && glob(pattern_path.as_bytes(), uri_path.as_bytes(), b"/?#", 0)
}

/// Matches `text` against `pattern`, where `*` is `least` or more bytes none of
/// which is in `stops`.
fn glob(pattern: &[u8], text: &[u8], stops: &[u8], least: usize) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => {
            let run = text.iter().take_while(|byte| !stops.contains(byte)).count();
            (least..=run).any(|taken| glob(rest, &text[taken..], stops, least))
        }
        Some((byte, rest)) => text
            .split_first()
            .is_some_and(|(first, text_rest)| first == byte && glob(rest, text_rest, stops, least)),
    }
}

/// Checks the common shape: an absolute URL, no fragment, no user name, at
/// most [`MAX_REDIRECT_URI_BYTES`].
fn check_common(uri: &str) -> Result<Url, String> {
    if uri.len() > MAX_REDIRECT_URI_BYTES {
        return Err(format!(
            "a redirect URI is at most {MAX_REDIRECT_URI_BYTES} bytes"
        ));
    }
    if uri
        .bytes()
        .any(|byte| byte.is_ascii_control() || byte == b' ')
    {
        return Err("a redirect URI has no spaces or control characters".to_owned());
    }
    let parsed = Url::parse(uri).map_err(|_| "a redirect URI is an absolute URL".to_owned())?;
    if parsed.fragment().is_some() || uri.contains('#') {
        return Err("a redirect URI has no fragment".to_owned());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("a redirect URI has no user name or password".to_owned());
    }
    Ok(parsed)
}

/// Checks a web client's redirect URI (an https URL with a host).
///
/// # Errors
/// Why it is not one.
pub fn check_web(uri: &str) -> Result<(), String> {
    let parsed = check_common(uri)?;
    if parsed.scheme() != "https" || parsed.host_str().is_none_or(str::is_empty) {
        return Err("a web client's redirect URI is an https URL".to_owned());
    }
    Ok(())
}

/// Whether `uri` is a loopback redirect URI (`http://127.0.0.1`,
/// `http://[::1]`, `http://localhost`, any port).
#[must_use]
pub fn is_loopback(uri: &str) -> bool {
    check_common(uri).is_ok_and(|parsed| {
        parsed.scheme() == "http"
            && matches!(parsed.host_str(), Some("127.0.0.1" | "[::1]" | "localhost"))
    })
}

/// Checks a native client's redirect URI: loopback http, or a private-use
/// scheme.
///
/// # Errors
/// Why it is not one.
pub fn check_native(uri: &str) -> Result<(), String> {
    if is_loopback(uri) {
        return Ok(());
    }
    let parsed = check_common(uri)?;
    let scheme = parsed.scheme();
    if NOT_PRIVATE_USE.contains(&scheme) {
        return Err(
            "a native client's redirect URI is http://127.0.0.1, http://[::1] or http://localhost (any port), or a private-use scheme such as com.example.app:/callback"
                .to_owned(),
        );
    }
    Ok(())
}

/// Checks a redirect URI the operator configures for a confidential client:
/// https, loopback http, or a private-use scheme.
///
/// # Errors
/// Why it is not one.
pub fn check_configured(uri: &str) -> Result<(), String> {
    check_web(uri).or_else(|_| check_native(uri))
}

/// Whether the `presented` redirect URI is the `registered` one: equal, or for
/// a native client's loopback URI equal but for the port.
#[must_use]
pub fn redirect_matches(registered: &str, presented: &str, native: bool) -> bool {
    if registered == presented {
        return true;
    }
    if !native || !is_loopback(registered) || !is_loopback(presented) {
        return false;
    }
    let (Ok(mut registered), Ok(mut presented)) = (Url::parse(registered), Url::parse(presented))
    else {
        return false;
    };
    if registered.set_port(None).is_err() || presented.set_port(None).is_err() {
        return false;
    }
    registered == presented
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_within_one_label_or_segment() {
        let pattern = "https://*.example.com/oauth/*/callback";
        assert!(check_pattern(pattern).is_ok());
        assert!(matches_pattern(
            pattern,
            "https://app.example.com/oauth/x/callback"
        ));
        assert!(!matches_pattern(
            pattern,
            "https://a.b.example.com/oauth/x/callback"
        ));
        assert!(!matches_pattern(
            pattern,
            "https://app.example.com/oauth/x/y/callback"
        ));
        assert!(!matches_pattern(
            pattern,
            "https://.example.com/oauth/x/callback"
        ));
        assert!(!matches_pattern(
            pattern,
            "http://app.example.com/oauth/x/callback"
        ));
        assert!(!matches_pattern(
            pattern,
            "https://app.example.com/oauth/x/callback#f"
        ));
        assert!(!matches_pattern(
            pattern,
            "https://app.example.com.evil/oauth/x/callback"
        ));
        assert!(check_pattern("http://example.com/*").is_err());
        assert!(check_pattern("https://example.com:*/").is_err());
    }

    #[test]
    fn native_loopback_ports_are_free() {
        assert!(check_native("http://127.0.0.1:4567/callback").is_ok());
        assert!(check_native("com.example.app:/callback").is_ok());
        assert!(check_native("http://example.com/callback").is_err());
        assert!(check_native("javascript:alert(1)").is_err());
        assert!(redirect_matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:61234/callback",
            true
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:61234/callbacks",
            true
        ));
        assert!(!redirect_matches(
            "http://127.0.0.1/callback",
            "http://127.0.0.1:61234/callback",
            false
        ));
    }
}
