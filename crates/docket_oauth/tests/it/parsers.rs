//! Property tests at every parser a client reaches: form and query decoding,
//! redirect-URI rules, registration metadata, metadata documents and PKCE.
//! The party is a hostile client: whatever it sends, the parsers stay within
//! their bounds and never accept what the rules refuse.

use docket_oauth::cimd::{check_document_url, parse_document};
use docket_oauth::config::RegistrationConfig;
use docket_oauth::params::{MAX_PARAMS, Params, value_cap};
use docket_oauth::pkce::{challenge_of, check_challenge, verify};
use docket_oauth::redirect::{check_native, matches_pattern, redirect_matches};
use docket_oauth::register::parse_metadata;
use proptest::prelude::*;
use serde_json::json;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decoded_params_respect_their_caps(input in proptest::collection::vec(any::<u8>(), 0..4096)) {
        if let Ok(params) = Params::parse(&input) {
            prop_assert!(params.len() <= MAX_PARAMS);
        }
    }

    #[test]
    fn a_value_over_its_cap_is_refused(name in "(state|code_verifier|redirect_uri|scope|x)", extra in 1_usize..64) {
        let value = "a".repeat(value_cap(&name) + extra);
        let input = format!("{name}={value}");
        prop_assert!(Params::parse(input.as_bytes()).is_err());
        let input = format!("{name}=a&{name}=b");
        prop_assert!(Params::parse(input.as_bytes()).is_err(), "a repeated parameter is refused");
    }

    #[test]
    fn encoded_pairs_decode_to_themselves(value in "\\PC{0,100}") {
        let input = format!("state={}", form_encode(&value));
        let params = Params::parse(input.as_bytes()).expect("within the caps");
        let expected = (!value.is_empty()).then_some(value.as_str());
        prop_assert_eq!(params.get("state"), expected);
    }

    #[test]
    fn a_pattern_matches_only_its_own_host(label in "[a-z0-9]{1,12}", tail in "[a-z./:@?#-]{0,12}") {
        let pattern = "https://*.apps.example.com/oauth/callback";
        let good = format!("https://{label}.apps.example.com/oauth/callback");
        prop_assert!(matches_pattern(pattern, &good));
        let bad = format!("https://{label}.apps.example.com/oauth/callback{tail}");
        if !tail.is_empty() {
            prop_assert!(!matches_pattern(pattern, &bad));
        }
        let other_host = format!("https://{label}.apps.example.com{tail}.evil/oauth/callback");
        prop_assert!(!matches_pattern(pattern, &other_host));
    }

    #[test]
    fn a_redirect_uri_differing_anywhere_is_refused(index in 0_usize..40, byte in b'!'..=b'~') {
        let registered = "https://app.example.com/oauth/callback?x=1";
        let mut presented = registered.as_bytes().to_vec();
        let index = index % presented.len();
        prop_assume!(presented[index] != byte);
        presented[index] = byte;
        let presented = String::from_utf8(presented).expect("ascii");
        prop_assert!(!redirect_matches(registered, &presented, true));
        prop_assert!(!redirect_matches(registered, &presented, false));
    }

    #[test]
    fn loopback_ports_are_free_but_nothing_else(port in 1_u16.., path in "/[a-z]{0,10}") {
        let registered = format!("http://127.0.0.1{path}");
        let presented = format!("http://127.0.0.1:{port}{path}");
        prop_assert!(redirect_matches(&registered, &presented, true));
        prop_assert!(!redirect_matches(&registered, &presented, false));
        let elsewhere = format!("http://127.0.0.2:{port}{path}");
        prop_assert!(!redirect_matches(&registered, &elsewhere, true));
        prop_assert!(check_native(&presented).is_ok());
    }

    #[test]
    fn registration_metadata_never_accepts_a_foreign_web_uri(
        host in "[a-z]{1,10}\\.[a-z]{2,5}",
        application_type in prop_oneof![Just(None), Just(Some("web")), Just(Some("native")), Just(Some("other"))],
    ) {
        let config = RegistrationConfig {
            redirect_uris: vec!["https://app.example.com/callback".to_owned()],
            ..RegistrationConfig::default()
        };
        let mut body = json!({"redirect_uris": [format!("https://{host}/callback")]});
        if let Some(kind) = application_type {
            body["application_type"] = kind.into();
        }
        let parsed = parse_metadata(body.to_string().as_bytes(), &config);
        if host != "app.example.com" {
            prop_assert!(parsed.is_err());
        }
    }

    #[test]
    fn registration_metadata_is_bounded(bytes in proptest::collection::vec(any::<u8>(), 0..2048), uris in 11_usize..20) {
        let config = RegistrationConfig::default();
        let _ = parse_metadata(&bytes, &config);
        let many: Vec<String> = (0..uris).map(|port| format!("http://127.0.0.1:{port}/cb")).collect();
        let body = json!({"application_type": "native", "redirect_uris": many});
        let refused = parse_metadata(body.to_string().as_bytes(), &config).expect_err("over 10 URIs");
        prop_assert_eq!(refused.code, "invalid_redirect_uri");
    }

    #[test]
    fn a_document_must_name_its_own_url(path in "/[a-z]{1,10}\\.json", other in "/[a-z]{1,10}\\.json") {
        let url = format!("https://clients.example.com{path}");
        prop_assert!(check_document_url(&url).is_ok());
        let own = json!({"client_id": url, "redirect_uris": ["http://127.0.0.1/cb"]});
        prop_assert!(parse_document(&url, own.to_string().as_bytes()).is_ok());
        let foreign = json!({"client_id": format!("https://clients.example.com{other}"),
                             "redirect_uris": ["http://127.0.0.1/cb"]});
        if other != path {
            prop_assert!(parse_document(&url, foreign.to_string().as_bytes()).is_err());
        }
        let secret = json!({"client_id": url, "redirect_uris": ["http://127.0.0.1/cb"],
                            "token_endpoint_auth_method": "client_secret_basic"});
        prop_assert!(parse_document(&url, secret.to_string().as_bytes()).is_err());
    }

    #[test]
    fn documents_from_arbitrary_bytes_are_refused_or_valid(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        let url = "https://clients.example.com/c.json";
        if let Ok(document) = parse_document(url, &bytes) {
            prop_assert_eq!(document.client_id, url);
        }
    }

    #[test]
    fn pkce_accepts_only_the_verifier_of_the_challenge(verifier in "[A-Za-z0-9._~-]{43,128}", other in "[A-Za-z0-9._~-]{43,128}") {
        let challenge = challenge_of(&verifier);
        prop_assert!(check_challenge(Some(&challenge), Some("S256")).is_ok());
        prop_assert!(check_challenge(Some(&challenge), Some("plain")).is_err());
        prop_assert!(check_challenge(Some(&challenge), None).is_err());
        prop_assert!(verify(&verifier, &challenge).is_ok());
        if other != verifier {
            prop_assert!(verify(&other, &challenge).is_err());
        }
        prop_assert!(verify(&verifier[..42], &challenge_of(&verifier[..42])).is_err(), "too short");
    }
}

fn form_encode(value: &str) -> String {
    let mut encoded = String::new();
    for byte in value.as_bytes() {
        if byte.is_ascii_alphanumeric() {
            encoded.push(char::from(*byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}
