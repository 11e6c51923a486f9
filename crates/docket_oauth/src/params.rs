//! Form bodies and query strings (`application/x-www-form-urlencoded`), read
//! with the bounds every endpoint shares: a capped input, at most
//! [`MAX_PARAMS`] parameters, each name at most [`MAX_NAME_BYTES`] and each
//! value at most its own cap ([`value_cap`]), no parameter twice (RFC 6749
//! §3.1), and an empty value read as absent.

/// The most parameters one request may carry.
pub const MAX_PARAMS: usize = 32;

/// The most bytes of a parameter's name.
pub const MAX_NAME_BYTES: usize = 64;

/// The most bytes of a form body or query string.
pub const MAX_INPUT_BYTES: usize = 16 * 1024;

/// The most bytes of a (decoded) parameter value called `name` (a refresh
/// token may carry the provider's, sealed: 4096, as any other name).
#[must_use]
pub fn value_cap(name: &str) -> usize {
    match name {
        "code_verifier" | "code_challenge" => 128,
        "code_challenge_method"
        | "response_type"
        | "grant_type"
        | "token_type_hint"
        | "decision"
        | "response_mode" => 64,
        "state" | "nonce" | "csrf" | "pending" => 512,
        "code" => 256,
        "scope" | "error" | "iss" => 1024,
        "redirect_uri" => 2000,
        "client_id" | "resource" | "client_secret" => 2048,
        _ => 4096,
    }
}

/// Why a form or query string was refused; the message names the parameter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// The input is larger than [`MAX_INPUT_BYTES`].
    #[error("the request's parameters are over {MAX_INPUT_BYTES} bytes")]
    TooLarge,
    /// More than [`MAX_PARAMS`] parameters.
    #[error("the request has more than {MAX_PARAMS} parameters")]
    TooMany,
    /// A name or value over its cap.
    #[error("the parameter {name} is over {cap} bytes")]
    TooLong {
        /// The parameter (cut to [`MAX_NAME_BYTES`]).
        name: String,
        /// Its cap.
        cap: usize,
    },
    /// A parameter given twice.
    #[error("the parameter {0} is given more than once")]
    Repeated(String),
}

/// The decoded parameters of one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Decodes `input` (a query string without `?`, or a form body).
    ///
    /// # Errors
    /// A [`ParamError`] for input over any bound or a repeated parameter.
    pub fn parse(input: &[u8]) -> Result<Self, ParamError> {
        if input.len() > MAX_INPUT_BYTES {
            return Err(ParamError::TooLarge);
        }
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in form_urlencoded::parse(input) {
            if name.is_empty() && value.is_empty() {
                continue;
            }
            if pairs.len() == MAX_PARAMS {
                return Err(ParamError::TooMany);
            }
            if name.len() > MAX_NAME_BYTES {
                return Err(ParamError::TooLong {
                    name: cut(&name, MAX_NAME_BYTES).to_owned(),
                    cap: MAX_NAME_BYTES,
                });
            }
            let cap = value_cap(&name);
            if value.len() > cap {
                return Err(ParamError::TooLong {
                    name: name.into_owned(),
                    cap,
                });
            }
            if pairs.iter().any(|(seen, _)| *seen == name) {
                return Err(ParamError::Repeated(name.into_owned()));
            }
            pairs.push((name.into_owned(), value.into_owned()));
        }
        Ok(Self { pairs })
    }

    /// The value of `name`; `None` when it is absent or empty.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }

    /// How many parameters there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

/// `text` cut to at most `bytes` bytes, at a character boundary.
pub(crate) fn cut(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Encodes pairs as a form body or query string.
pub(crate) fn encode<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        serializer.append_pair(name, value);
    }
    serializer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_long_and_empty_parameters() {
        let params = Params::parse(b"a=1&b=&c=%20x").expect("parses");
        assert_eq!(params.get("a"), Some("1"));
        assert_eq!(params.get("b"), None);
        assert_eq!(params.get("c"), Some(" x"));
        assert_eq!(
            Params::parse(b"state=1&state=2"),
            Err(ParamError::Repeated("state".to_owned()))
        );
        let long = format!("code_verifier={}", "a".repeat(129));
        assert!(matches!(
            Params::parse(long.as_bytes()),
            Err(ParamError::TooLong { cap: 128, .. })
        ));
    }
}
