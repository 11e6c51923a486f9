//! Durations in configuration, written as the server writes them: `250ms`, `60s`,
//! `5m`, `1h`, or a bare number of seconds.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Parses `text` (see the module documentation).
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 25s, 5m or 1h"))?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(amount)),
        "" | "s" => Ok(Duration::from_secs(amount)),
        "m" => Ok(Duration::from_secs(amount.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(amount.saturating_mul(3600))),
        other => Err(format!(
            "{text:?} has an unknown unit {other:?} (use ms, s, m or h)"
        )),
    }
}

/// Serde adapter for [`parse`], accepting a string or a number of seconds.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(u64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Seconds(seconds) => Ok(Duration::from_secs(seconds)),
        Raw::Text(text) => parse(&text).map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert!(parse("5 parsecs").is_err());
        assert!(parse("").is_err());
        assert!(parse("-1s").is_err());
    }
}
