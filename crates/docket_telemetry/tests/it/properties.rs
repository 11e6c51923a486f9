//! Property tests of the trace-context parsers (256 cases each): they never panic, accept
//! every valid input they are given, and refuse every mutation that breaks the W3C rules, as
//! an independent reading of the grammar (regular expressions) decides.

use std::sync::LazyLock;

use docket_telemetry::context::{TraceContext, parse_traceparent, tracestate_ok};
use proptest::prelude::*;
use regex::Regex;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

static TRACEPARENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x20-\x7e]*)?$")
        .expect("a valid pattern")
});
static SIMPLE_KEY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[a-z][a-z0-9_\-*/]{0,255}$").expect("a valid pattern"));
static TENANT_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13}$").expect("a valid pattern")
});
static VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$")
        .expect("a valid pattern")
});

/// The W3C rules for a traceparent, read independently of the parser.
fn traceparent_valid(text: &str) -> bool {
    let Some(captures) = TRACEPARENT.captures(text) else {
        return false;
    };
    let version = &captures[1];
    let zero_trace = captures[2].bytes().all(|digit| digit == b'0');
    let zero_parent = captures[3].bytes().all(|digit| digit == b'0');
    let rest = captures.get(5).map_or("", |rest| rest.as_str());
    version != "ff"
        && !zero_trace
        && !zero_parent
        && (version != "00" || rest.is_empty())
        && text.len() <= docket_telemetry::context::MAX_TRACEPARENT_BYTES
}

/// The W3C rules for a tracestate, read independently of the parser.
fn tracestate_valid(text: &str) -> bool {
    if text.len() > 512 {
        return false;
    }
    let mut keys = Vec::new();
    for member in text.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let Some((key, value)) = member.split_once('=') else {
            return false;
        };
        let key_valid = SIMPLE_KEY.is_match(key) || TENANT_KEY.is_match(key);
        if !key_valid || !VALUE.is_match(value) || keys.contains(&key.to_owned()) {
            return false;
        }
        keys.push(key.to_owned());
    }
    !keys.is_empty() && keys.len() <= 32
}

fn hex_digits(length: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        proptest::sample::select(b"0123456789abcdef".to_vec()),
        length,
    )
    .prop_map(|digits| String::from_utf8(digits).expect("ASCII"))
}

/// Valid traceparents: version 00 exactly, and later versions with an optional tail.
fn valid_traceparent() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just("00".to_owned()), hex_digits(2)],
        1u128..,
        1u64..,
        any::<u8>(),
        proptest::option::of("-[a-z0-9-]{0,40}"),
    )
        .prop_filter_map(
            "ff is not a version",
            |(version, trace, parent, flags, tail)| {
                if version == "ff" {
                    return None;
                }
                let tail = if version == "00" { None } else { tail };
                Some(format!(
                    "{version}-{trace:032x}-{parent:016x}-{flags:02x}{}",
                    tail.unwrap_or_default()
                ))
            },
        )
}

/// A change at one place: a byte replaced, removed or inserted, or the text cut or doubled.
fn mutate(text: &str, how: u8, at: usize, with: char) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let at = at % (chars.len() + 1);
    match how % 5 {
        0 if at < chars.len() => chars[at] = with,
        1 if at < chars.len() => {
            chars.remove(at);
        }
        2 => chars.insert(at, with),
        3 => chars.truncate(at),
        _ => return format!("{text}{text}"),
    }
    chars.into_iter().collect()
}

fn mutation_char() -> impl Strategy<Value = char> {
    prop_oneof![
        proptest::sample::select(vec![
            '0', 'f', 'F', 'g', '-', ' ', '\t', ',', '=', '@', 'A', 'z', '~', '\u{7f}', 'é', '*',
            '/',
        ]),
        any::<char>(),
    ]
}

fn member() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        "[a-z][a-z0-9_*/-]{0,12}",
        "[a-z0-9][a-z0-9_*/-]{0,8}@[a-z][a-z0-9_*/-]{0,5}",
    ];
    let value = "[!-+\\--<>-~]([ !-+\\--<>-~]{0,10}[!-+\\--<>-~])?";
    (key, value).prop_map(|(key, value)| format!("{key}={value}"))
}

fn valid_tracestate() -> impl Strategy<Value = String> {
    (
        proptest::collection::btree_map("[a-z][a-z0-9]{0,6}", "[!-+\\--<>-~]{1,8}", 1..=32),
        proptest::sample::select(vec![",", ", ", " ,\t", ",,"]),
    )
        .prop_map(|(members, separator)| {
            members
                .into_iter()
                .map(|(key, value)| format!("{key}={value}"))
                .collect::<Vec<_>>()
                .join(separator)
        })
        .prop_filter("within 512 bytes", |text| text.len() <= 512)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_valid_traceparent_parses_to_its_parts(text in valid_traceparent()) {
        prop_assert!(traceparent_valid(&text), "the oracle agrees: {text}");
        let parsed = parse_traceparent(&text);
        prop_assert!(parsed.is_some(), "{text}");
        let parsed = parsed.expect("checked");
        prop_assert_eq!(parsed.trace_id_hex(), &text[3..35]);
        prop_assert_eq!(parsed.parent_id_hex(), &text[36..52]);
        prop_assert_eq!(format!("{:02x}", parsed.flags), &text[53..55]);
        prop_assert_eq!(format!("{:02x}", parsed.version), &text[0..2]);
    }

    #[test]
    fn a_mutated_traceparent_is_accepted_exactly_when_it_is_still_valid(
        text in valid_traceparent(),
        how in any::<u8>(),
        at in any::<usize>(),
        with in mutation_char(),
    ) {
        let mutated = mutate(&text, how, at, with);
        prop_assert_eq!(
            parse_traceparent(&mutated).is_some(),
            traceparent_valid(&mutated),
            "{:?}", mutated
        );
    }

    #[test]
    fn any_text_is_a_traceparent_or_none_without_panicking(text in ".{0,300}") {
        prop_assert_eq!(parse_traceparent(&text).is_some(), traceparent_valid(&text), "{:?}", text);
    }

    #[test]
    fn every_valid_tracestate_is_accepted(text in valid_tracestate()) {
        prop_assert!(tracestate_valid(&text), "the oracle agrees: {text}");
        prop_assert!(tracestate_ok(&text), "{text}");
    }

    #[test]
    fn a_mutated_tracestate_is_accepted_exactly_when_it_is_still_valid(
        members in proptest::collection::vec(member(), 1..=34),
        how in any::<u8>(),
        at in any::<usize>(),
        with in mutation_char(),
    ) {
        let text = members.join(",");
        let mutated = mutate(&text, how, at, with);
        prop_assert_eq!(tracestate_ok(&text), tracestate_valid(&text), "{:?}", text);
        prop_assert_eq!(tracestate_ok(&mutated), tracestate_valid(&mutated), "{:?}", mutated);
    }

    #[test]
    fn any_text_is_a_tracestate_or_not_without_panicking(text in ".{0,600}") {
        prop_assert_eq!(tracestate_ok(&text), tracestate_valid(&text), "{:?}", text);
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_stored_context_reads_back_as_it_was_stored(
        trace in 1u128..,
        parent in 1u64..,
        sampled in any::<bool>(),
        state in proptest::option::of(valid_tracestate()),
    ) {
        let stored = TraceContext {
            traceparent: format!("00-{trace:032x}-{parent:016x}-{:02x}", u8::from(sampled)),
            tracestate: state,
        };
        let span_context = stored.span_context();
        prop_assert!(span_context.is_some());
        let span_context = span_context.expect("checked");
        prop_assert_eq!(span_context.is_sampled(), sampled);
        prop_assert!(span_context.is_remote());
        let read = TraceContext::from_span_context(&span_context).expect("a valid context");
        prop_assert_eq!(&read.traceparent, &stored.traceparent);
        // The state survives as its members, with the separators normalised.
        let members = |text: &Option<String>| -> Vec<String> {
            text.iter()
                .flat_map(|text| text.split(','))
                .map(|member| member.trim_matches([' ', '\t']).to_owned())
                .filter(|member| !member.is_empty())
                .collect()
        };
        prop_assert_eq!(members(&read.tracestate), members(&stored.tracestate));
    }
}

#[test]
fn the_specifications_examples() {
    assert!(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").is_some());
    for invalid in [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01extra",
        "",
    ] {
        assert_eq!(parse_traceparent(invalid), None, "{invalid}");
    }
    assert!(
        parse_traceparent(
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-brings"
        )
        .is_some()
    );
    assert!(tracestate_ok("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
    assert!(tracestate_ok("fw529a3039@dt=ZmZmZmZmZmY"));
    assert!(!tracestate_ok("rojo=1,rojo=2"), "duplicate keys");
    assert!(!tracestate_ok("Rojo=1"), "upper-case key");
    assert!(
        tracestate_ok("rojo=a b , congo=c"),
        "spaces inside and around"
    );
    assert!(!tracestate_ok("rojo=a=b"), "= in a value");
    assert!(
        !tracestate_ok(&format!("a={}", "x".repeat(600))),
        "oversized"
    );
    let members: Vec<String> = (0..33).map(|index| format!("k{index}=v")).collect();
    assert!(!tracestate_ok(&members.join(",")), "33 members");
    assert!(tracestate_ok(&members[..32].join(",")), "32 members");
}

/// A later version's tail is printable ASCII: a newline in it (the case a CI
/// run's mutation found, `text` doubled around one) is refused, as by the oracle.
#[test]
fn a_control_character_in_a_later_versions_tail_is_refused() {
    let text = "01-00000000000000000000000000000001-0000000000000001-00-\n00-0000a";
    assert!(!traceparent_valid(text));
    assert!(parse_traceparent(text).is_none());
    let kept = "01-00000000000000000000000000000001-0000000000000001-00-later-fields";
    assert!(traceparent_valid(kept));
    assert!(parse_traceparent(kept).is_some());
}
