//! Mutual TLS for an `api` connection: a client certificate (with its chain)
//! and private key the connection presents, and optionally a private CA that
//! becomes the only root its server's certificate is checked against. The
//! client certificate's expiry is read once, when the client is built, so an
//! operator can see it before it passes (`not_after`).

use std::fmt;

use base64::Engine as _;
use time::OffsetDateTime;

/// What a connection presents and trusts. Its `Debug` output never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    /// The client certificate, then its chain, as PEM.
    pub certificate_pem: String,
    /// The certificate's private key, as PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_pem: String,
    /// A private CA's certificates, as PEM: when given, the only roots the
    /// server's certificate may chain to.
    pub ca_pem: Option<String>,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("key_pem", &"[REDACTED]")
            .field("private_ca", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Configures `builder` to present the certificate and, with a private CA,
    /// to trust only it. When the certificate's validity ends.
    ///
    /// # Errors
    /// Why the certificate, key or CA cannot be used, without their contents.
    pub(super) fn apply(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<(reqwest::ClientBuilder, OffsetDateTime), String> {
        let first = first_certificate(&self.certificate_pem)
            .ok_or("the client certificate is not a PEM certificate")?;
        let not_after =
            not_after(&first).ok_or("the client certificate's validity could not be read")?;
        let mut pem = self.certificate_pem.trim_end().to_owned();
        pem.push('\n');
        pem.push_str(&self.key_pem);
        let identity = reqwest::Identity::from_pem(pem.as_bytes())
            .map_err(|_| "the client certificate and key do not make an identity".to_owned())?;
        let mut builder = builder.identity(identity);
        if let Some(ca) = &self.ca_pem {
            let roots = reqwest::Certificate::from_pem_bundle(ca.as_bytes())
                .map_err(|_| "the private CA is not a PEM certificate".to_owned())?;
            if roots.is_empty() {
                return Err("the private CA holds no certificate".into());
            }
            builder = builder.tls_certs_only(roots);
        }
        Ok((builder, not_after))
    }
}

/// The DER of the first `CERTIFICATE` block of `pem`.
pub(crate) fn first_certificate(pem: &str) -> Option<Vec<u8>> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let start = pem.find(BEGIN)? + BEGIN.len();
    let end = start + pem[start..].find(END)?;
    let text: String = pem[start..end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// One DER element: its tag, and its contents and what follows them.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let length = rest[..count]
            .iter()
            .fold(0usize, |length, &byte| (length << 8) | usize::from(byte));
        (length, &rest[count..])
    };
    if rest.len() < length {
        return None;
    }
    Some((tag, &rest[..length], &rest[length..]))
}

/// When an X.509 certificate's validity ends (`notAfter`), from its DER:
/// Certificate → tbsCertificate → [version], serial, signature, issuer,
/// validity → notAfter.
pub(crate) fn not_after(der: &[u8]) -> Option<OffsetDateTime> {
    const SEQUENCE: u8 = 0x30;
    let (tag, certificate, _) = element(der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    let mut rest = tbs;
    // The explicit version ([0]) is optional.
    if rest.first() == Some(&0xa0) {
        rest = element(rest)?.2;
    }
    for _ in 0..3 {
        // serialNumber, signature, issuer.
        rest = element(rest)?.2;
    }
    let (tag, validity, _) = element(rest)?;
    if tag != SEQUENCE {
        return None;
    }
    let (_, _, after_not_before) = element(validity)?;
    let (tag, not_after, _) = element(after_not_before)?;
    let text = std::str::from_utf8(not_after).ok()?;
    // UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ).
    let (year, rest) = match tag {
        0x17 if text.len() == 13 => {
            let short: i32 = text.get(..2)?.parse().ok()?;
            (
                if short >= 50 {
                    1900 + short
                } else {
                    2000 + short
                },
                &text[2..],
            )
        }
        0x18 if text.len() == 15 => (text.get(..4)?.parse().ok()?, &text[4..]),
        _ => return None,
    };
    if !rest.ends_with('Z') {
        return None;
    }
    let number = |at: usize| -> Option<u8> { rest.get(at..at + 2)?.parse().ok() };
    let month = time::Month::try_from(number(0)?).ok()?;
    let date = time::Date::from_calendar_date(year, month, number(2)?).ok()?;
    let time = time::Time::from_hms(number(4)?, number(6)?, number(8)?).ok()?;
    Some(date.with_time(time).assume_utc())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A certificate made with `openssl req -x509 -newkey ec -days 30
    /// -subj /CN=docket-test` (`openssl x509 -enddate`: Jan 5 08:50:20 2027 GMT).
    const CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----
MIIBgDCCASegAwIBAgIUcoKCtgjfrVkv7tpS4DeR/KS84HcwCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLZG9ja2V0LXRlc3QwHhcNMjYxMjA2MDg1MDIwWhcNMjcwMTA1
MDg1MDIwWjAWMRQwEgYDVQQDDAtkb2NrZXQtdGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABEEbIKAVe3xzPNxkpsbDbcSon6Pyk3DkBQCpM420Ld2K4MOxkEHl
JmT7WQ/skIh1H1fgSjuOpg+BrF3oDotvH46jUzBRMB0GA1UdDgQWBBS48LlpJSoC
Q04yx4izHKe+WQy6vTAfBgNVHSMEGDAWgBS48LlpJSoCQ04yx4izHKe+WQy6vTAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0cAMEQCIA/drLq6ZhQP3mkIkTts
nh+JvxpzHcxzKXqDhvlNZHzhAiAKOhYtmGGuy/I9WUwK9EaxTEoG6u7fTRGJszvE
cE5yIw==
-----END CERTIFICATE-----";

    #[test]
    fn the_expiry_is_read_from_the_certificate() {
        let der = first_certificate(CERTIFICATE).expect("a certificate");
        let expected = time::macros::datetime!(2027-01-05 08:50:20 UTC);
        assert_eq!(not_after(&der), Some(expected));
    }

    #[test]
    fn text_that_is_no_certificate_has_no_expiry() {
        assert_eq!(first_certificate("no pem here"), None);
        assert_eq!(not_after(&[]), None);
        assert_eq!(not_after(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any bytes are read without a panic.
        #[test]
        fn any_der_is_read_safely(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = not_after(&bytes);
        }

        /// A real certificate cut anywhere is read without a panic.
        #[test]
        fn a_cut_certificate_is_read_safely(cut in 0usize..600) {
            let der = first_certificate(CERTIFICATE).expect("a certificate");
            let _ = not_after(&der[..cut.min(der.len())]);
        }
    }
}
