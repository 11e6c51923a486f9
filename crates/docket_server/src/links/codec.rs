//! The signed download link, as text: `/assets/{id}/content?expires=…&kid=…&sig=…`.
//! `sig` is HMAC-SHA-256, under the key `kid` names, of the asset id, the expiry
//! (Unix seconds) and the key id, so a signature opens one asset until one
//! instant and nothing else. Pure: no store, no clock (the caller passes `now`).
//!
//! Reading is strict, because the text comes from whoever holds a link: the
//! asset id is exactly the 32 lower-case hex digits Docket mints, compared as
//! the raw path carries it (so `%2F`, `..` or any other spelling of a path is
//! simply not an id), and the query holds exactly the three parameters, each
//! once, each in its one form.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = hmac::Hmac<Sha256>;

/// What a signature binds the fields to, so a MAC made for anything else with
/// the same key (there is none today) can never open an asset.
const DOMAIN: &str = "docket-asset-link/1";

/// The length of a signature as base64url without padding (32 bytes).
const SIG_CHARS: usize = 43;

/// The most digits an expiry may have (Unix seconds well past the year 9999).
const MAX_EXPIRY_DIGITS: usize = 12;

/// The most bytes of a key id in a link.
const MAX_KID_BYTES: usize = docket_catalog::links::MAX_KID_BYTES;

/// Why a link was refused. The holder is told only that it does not open
/// (or, for a genuine link, that it expired); the variants are for tests and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkError {
    /// The path's id is not an asset id as Docket mints them.
    BadId,
    /// The query is not exactly `expires`, `kid` and `sig`, once each, well formed.
    BadQuery,
    /// No key with that id.
    UnknownKey,
    /// The signature does not match.
    BadSignature,
    /// A genuine link past its expiry.
    Expired,
}

/// The parts of a link's query, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LinkQuery {
    /// Unix seconds after which the link no longer opens.
    pub(crate) expires: i64,
    /// The key it was signed with.
    pub(crate) kid: String,
    /// The signature's 32 bytes.
    pub(crate) sig: Vec<u8>,
}

/// Whether `id` is an asset id as Docket mints them: 32 lower-case hex digits.
pub(crate) fn is_asset_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

fn mac(secret: &[u8], asset_id: &str, expires: i64, kid: &str) -> HmacSha256 {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| <HmacSha256 as KeyInit>::new(&Default::default()));
    // Newline-separated: no field may hold a newline (ids and kids are
    // alphanumeric, the expiry is digits), so the encoding is unambiguous.
    mac.update(format!("{DOMAIN}\n{asset_id}\n{expires}\n{kid}").as_bytes());
    mac
}

/// The query (without `?`) of a link to `asset_id` that opens until `expires`
/// (Unix seconds), signed with `secret` under `kid`.
pub(crate) fn sign(secret: &[u8], kid: &str, asset_id: &str, expires: i64) -> String {
    let sig = mac(secret, asset_id, expires, kid).finalize().into_bytes();
    format!(
        "expires={expires}&kid={kid}&sig={}",
        URL_SAFE_NO_PAD.encode(sig)
    )
}

/// Reads a link's query strictly.
///
/// # Errors
/// [`LinkError::BadQuery`] for anything but the three parameters once each in
/// their one form.
pub(crate) fn parse_query(query: &str) -> Result<LinkQuery, LinkError> {
    let (mut expires, mut kid, mut sig) = (None, None, None);
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').ok_or(LinkError::BadQuery)?;
        let slot = match name {
            "expires" => &mut expires,
            "kid" => &mut kid,
            "sig" => &mut sig,
            _ => return Err(LinkError::BadQuery),
        };
        if slot.replace(value).is_some() {
            return Err(LinkError::BadQuery);
        }
    }
    let (Some(expires), Some(kid), Some(sig)) = (expires, kid, sig) else {
        return Err(LinkError::BadQuery);
    };
    // Digits only, without a sign or leading zero, so one expiry has one spelling.
    if expires.is_empty()
        || expires.len() > MAX_EXPIRY_DIGITS
        || !expires.bytes().all(|byte| byte.is_ascii_digit())
        || (expires.len() > 1 && expires.starts_with('0'))
    {
        return Err(LinkError::BadQuery);
    }
    let expires: i64 = expires.parse().map_err(|_| LinkError::BadQuery)?;
    if kid.is_empty()
        || kid.len() > MAX_KID_BYTES
        || !kid.bytes().all(|byte| byte.is_ascii_alphanumeric())
    {
        return Err(LinkError::BadQuery);
    }
    if sig.len() != SIG_CHARS {
        return Err(LinkError::BadQuery);
    }
    let sig = URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| LinkError::BadQuery)?;
    // Base64 may spell 32 bytes with different final characters; only the
    // canonical spelling is accepted, so one link has one text.
    if URL_SAFE_NO_PAD.encode(&sig) != query_value(query, "sig") {
        return Err(LinkError::BadQuery);
    }
    Ok(LinkQuery {
        expires,
        kid: kid.to_owned(),
        sig,
    })
}

fn query_value<'a>(query: &'a str, name: &str) -> &'a str {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map_or("", |(_, value)| value)
}

/// Checks a link: the path's `asset_id`, its query, and the key its `kid`
/// names (`secret_of`), at `now` (Unix seconds). The signature is checked
/// before the expiry, so only a genuine link learns that it expired.
///
/// # Errors
/// The [`LinkError`] that refused it.
pub(crate) fn verify(
    asset_id: &str,
    query: &str,
    now: i64,
    secret_of: impl FnOnce(&str) -> Option<Vec<u8>>,
) -> Result<LinkQuery, LinkError> {
    if !is_asset_id(asset_id) {
        return Err(LinkError::BadId);
    }
    let link = parse_query(query)?;
    let secret = secret_of(&link.kid).ok_or(LinkError::UnknownKey)?;
    mac(&secret, asset_id, link.expires, &link.kid)
        .verify_slice(&link.sig)
        .map_err(|_| LinkError::BadSignature)?;
    if now >= link.expires {
        return Err(LinkError::Expired);
    }
    Ok(link)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const ASSET: &str = "0123456789abcdef0123456789abcdef";
    const OTHER: &str = "fedcba9876543210fedcba9876543210";
    const SECRET: &[u8] = b"a secret of thirty-two bytes!!!!";
    const NOW: i64 = 1_800_000_000;

    fn keys(kid: &str) -> Option<Vec<u8>> {
        match kid {
            "k1" => Some(SECRET.to_vec()),
            "k2" => Some(b"another secret".to_vec()),
            _ => None,
        }
    }

    #[test]
    fn a_signed_link_opens_its_asset_until_it_expires() {
        let query = sign(SECRET, "k1", ASSET, NOW + 60);
        let link = verify(ASSET, &query, NOW, keys).expect("opens");
        assert_eq!(link.expires, NOW + 60);
        assert_eq!(link.kid, "k1");
        assert_eq!(verify(ASSET, &query, NOW + 59, keys).map(drop), Ok(()));
        assert_eq!(
            verify(ASSET, &query, NOW + 60, keys),
            Err(LinkError::Expired)
        );
    }

    #[test]
    fn a_signature_opens_no_other_asset() {
        let query = sign(SECRET, "k1", ASSET, NOW + 60);
        assert_eq!(
            verify(OTHER, &query, NOW, keys),
            Err(LinkError::BadSignature)
        );
    }

    #[test]
    fn a_key_id_must_name_the_key_that_signed() {
        let query = sign(SECRET, "k1", ASSET, NOW + 60);
        // Another known key, and one nobody knows.
        let moved = query.replace("kid=k1", "kid=k2");
        assert_eq!(
            verify(ASSET, &moved, NOW, keys),
            Err(LinkError::BadSignature)
        );
        let unknown = query.replace("kid=k1", "kid=k9");
        assert_eq!(
            verify(ASSET, &unknown, NOW, keys),
            Err(LinkError::UnknownKey)
        );
        // A key removed by rotation no longer opens what it signed.
        assert_eq!(
            verify(ASSET, &query, NOW, |_| None),
            Err(LinkError::UnknownKey)
        );
    }

    #[test]
    fn a_later_expiry_breaks_the_signature() {
        let query = sign(SECRET, "k1", ASSET, NOW + 60);
        let later = query.replace(
            &format!("expires={}", NOW + 60),
            &format!("expires={}", NOW + 6000),
        );
        assert_eq!(
            verify(ASSET, &later, NOW, keys),
            Err(LinkError::BadSignature)
        );
    }

    #[test]
    fn path_tricks_are_not_asset_ids() {
        let query = sign(SECRET, "k1", ASSET, NOW + 60);
        for path_id in [
            "",
            "..",
            "../0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef/..",
            "0123456789abcdef0123456789abcdef%2F",
            "0123456789abcdef%2F0123456789abcdef",
            "0123456789ABCDEF0123456789ABCDEF",
            "%30123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "task_0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(
                verify(path_id, &query, NOW, keys),
                Err(LinkError::BadId),
                "{path_id:?}"
            );
        }
    }

    #[test]
    fn queries_have_one_form() {
        let query = sign(SECRET, "k1", ASSET, NOW + 60);
        let sig = query_value(&query, "sig").to_owned();
        let expires = NOW + 60;
        for bad in [
            String::new(),
            format!("{query}&sig={sig}"),
            format!("{query}&extra=1"),
            format!("expires={expires}&kid=k1"),
            format!("expires=0{expires}&kid=k1&sig={sig}"),
            format!("expires=+{expires}&kid=k1&sig={sig}"),
            format!("expires={expires}&kid=k%31&sig={sig}"),
            format!("expires={expires}&kid=k1&sig={sig}="),
            format!("expires={expires}&kid=k1&sig={}", &sig[..42]),
            format!("expires={expires}&kid=&sig={sig}"),
            format!("expires={expires}&kid=k1&sig"),
            format!("expires={expires}&&kid=k1&sig={sig}"),
        ] {
            assert_eq!(
                verify(ASSET, &bad, NOW, keys),
                Err(LinkError::BadQuery),
                "{bad:?}"
            );
        }
        // The parameters may come in any order.
        let reordered = format!("sig={sig}&kid=k1&expires={expires}");
        assert!(verify(ASSET, &reordered, NOW, keys).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Forgery: any changed byte of a genuine link's query is refused.
        #[test]
        fn any_changed_byte_is_refused(
            expires_in in 1i64..10_000_000,
            position in any::<prop::sample::Index>(),
            replacement in any::<u8>(),
        ) {
            let query = sign(SECRET, "k1", ASSET, NOW + expires_in);
            let mut bytes = query.clone().into_bytes();
            let at = position.index(bytes.len());
            prop_assume!(bytes[at] != replacement);
            bytes[at] = replacement;
            let changed = String::from_utf8_lossy(&bytes).into_owned();
            prop_assert!(verify(ASSET, &changed, NOW, keys).is_err(), "{changed:?} opened");
        }

        /// Forgery: any changed byte of the path's id is refused, with a
        /// signature that is genuine for the original id.
        #[test]
        fn any_changed_byte_of_the_id_is_refused(
            position in 0usize..32,
            replacement in any::<u8>(),
        ) {
            let query = sign(SECRET, "k1", ASSET, NOW + 60);
            let mut id = ASSET.as_bytes().to_vec();
            prop_assume!(id[position] != replacement);
            id[position] = replacement;
            let id = String::from_utf8_lossy(&id).into_owned();
            prop_assert!(verify(&id, &query, NOW, keys).is_err());
        }

        /// A signature made with any other secret never verifies.
        #[test]
        fn another_secret_forges_nothing(
            secret in prop::collection::vec(any::<u8>(), 1..64),
            expires_in in 1i64..10_000_000,
        ) {
            prop_assume!(secret != SECRET);
            let query = sign(&secret, "k1", ASSET, NOW + expires_in);
            prop_assert_eq!(verify(ASSET, &query, NOW, keys), Err(LinkError::BadSignature));
        }

        /// Arbitrary text as a query or an id never opens anything, and never panics.
        #[test]
        fn arbitrary_text_opens_nothing(id in ".{0,80}", query in ".{0,200}") {
            prop_assert!(verify(&id, &query, NOW, keys).is_err());
        }

        /// Every genuine link opens before its expiry and not from it on.
        #[test]
        fn genuine_links_open_exactly_until_they_expire(
            expires_in in 1i64..10_000_000,
            elapsed in 0i64..20_000_000,
        ) {
            let query = sign(SECRET, "k1", ASSET, NOW + expires_in);
            let opened = verify(ASSET, &query, NOW + elapsed, keys);
            if elapsed < expires_in {
                prop_assert!(opened.is_ok());
            } else {
                prop_assert_eq!(opened, Err(LinkError::Expired));
            }
        }
    }
}
