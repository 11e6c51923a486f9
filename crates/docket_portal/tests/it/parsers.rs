//! Properties of what the portal reads from the browser: the `Cookie`
//! header, CSRF tokens, secrets and the path to return to. Each runs a fixed
//! number of cases, so a run takes the same time every time.

use docket_portal::{cookie, csrf, login, secret};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Any header is read without panicking, and nothing too long is read.
    #[test]
    fn any_cookie_header_is_read_safely(header in ".{0,600}") {
        let found = cookie::find(&header, cookie::SESSION_COOKIE);
        if let Some(value) = found {
            prop_assert!(header.contains(value));
        }
    }

    /// The session cookie is found among others, whatever their order, and a
    /// second cookie of the same name makes it ambiguous, so none is read.
    #[test]
    fn the_session_cookie_is_found_once_among_others(
        others in proptest::collection::vec(("[a-z_]{1,12}", "[A-Za-z0-9]{0,20}"), 0..6),
        position in 0_usize..7,
        value in "[A-Za-z0-9_-]{43}",
        twice in any::<bool>(),
    ) {
        let mut pairs: Vec<String> = others
            .iter()
            .filter(|(name, _)| name != cookie::SESSION_COOKIE)
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        let at = position.min(pairs.len());
        pairs.insert(at, format!("{}={value}", cookie::SESSION_COOKIE));
        if twice {
            pairs.push(format!("{}=other", cookie::SESSION_COOKIE));
        }
        let header = pairs.join("; ");
        let found = cookie::find(&header, cookie::SESSION_COOKIE);
        if twice {
            prop_assert_eq!(found, None);
        } else {
            prop_assert_eq!(found, Some(value.as_str()));
        }
    }

    /// A session's token matches that session only; any change is refused.
    #[test]
    fn a_csrf_token_matches_only_its_session(
        first in "[A-Za-z0-9_-]{43}",
        second in "[A-Za-z0-9_-]{43}",
        presented in ".{0,60}",
    ) {
        let token = csrf::token(&first);
        prop_assert!(csrf::matches(&first, &token));
        prop_assert_eq!(csrf::matches(&second, &token), first == second);
        prop_assert_eq!(csrf::matches(&first, &presented), presented == token);
        prop_assert!(!csrf::matches(&first, ""));
    }

    /// Only 43 base64url characters are a secret's shape.
    #[test]
    fn only_secret_shaped_text_is_looked_up(text in ".{0,60}") {
        let shaped = text.len() == 43
            && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        prop_assert_eq!(secret::is_secret_shaped(&text), shaped);
    }

    /// Whatever a login is asked to return to, it returns under `/portal`,
    /// never to another origin (`//host`, `/\host`) or a scheme.
    #[test]
    fn a_login_returns_only_under_the_portal(path in ".{0,80}") {
        let back = login::safe_return_to(Some(&path));
        prop_assert!(back == "/portal" || back.starts_with("/portal/"));
        prop_assert!(!back.contains("//") && !back.contains('\\'));
        prop_assert!(back.bytes().all(|b| b.is_ascii_graphic()));
    }
}

#[test]
fn secrets_are_random_and_shaped() {
    let first = secret::random_secret().expect("random");
    let second = secret::random_secret().expect("random");
    assert!(secret::is_secret_shaped(&first));
    assert_ne!(first, second);
    assert_eq!(secret::hash(&first).len(), 64);
}

#[test]
fn tricky_return_paths_fall_back_to_the_portal() {
    for path in [
        "//evil.example/portal",
        "/portal//evil.example",
        "/portal/\\evil",
        "https://evil.example/portal",
        "/portalx",
        "/other",
        "",
    ] {
        assert_eq!(login::safe_return_to(Some(path)), "/portal", "{path}");
    }
    assert_eq!(login::safe_return_to(Some("/portal/work")), "/portal/work");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever a tool answers, the page it makes holds no markup of the
    /// answer's: every `<`, `>`, quote and `&` of any text is escaped.
    #[test]
    fn any_answer_renders_without_its_markup(text in ".{0,64}", key in ".{0,16}") {
        let answer = serde_json::json!({
            key.clone(): [{ key.clone(): text.clone(), "n": 1 }, { "other": [text.clone()] }],
            "line": format!("{text}\n{text}"),
        });
        let html = docket_portal::render::html(&answer);
        let escaped = docket_portal::render::escape(&text);
        prop_assert!(!escaped.contains(['<', '>', '"', '\'']));
        // The page's own tags are the only markup: strip them, and no `<` is left.
        let mut stripped = html.clone();
        for tag in ["<dl>", "</dl>", "<dt>", "</dt>", "<dd>", "</dd>", "<table>", "</table>",
                    "<thead>", "</thead>", "<tbody>", "</tbody>", "<tr>", "</tr>", "<th>",
                    "</th>", "<td>", "</td>", "<ul>", "</ul>", "<li>", "</li>", "<pre>", "</pre>"] {
            stripped = stripped.replace(tag, "");
        }
        prop_assert!(!stripped.contains('<') && !stripped.contains('>'), "{}", html);
    }
}
