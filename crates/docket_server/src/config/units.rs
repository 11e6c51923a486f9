//! Sizes and durations as operators write them in the configuration (`512KiB`,
//! `250ms`), and their serde adapters.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Parses sizes written as `1048576`, `512KiB`, `100MiB`, `1GiB` (or `KB`/`MB`/`GB`, taken as
/// powers of 1024 too, as operators mean them).
///
/// # Errors
/// A message saying what was expected.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 512KiB, 100MiB or 1GiB"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "{text:?} has an unknown unit {other:?} (use KiB, MiB or GiB)"
            ));
        }
    };
    amount
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Serde adapter for [`parse_bytes`], accepting a string or a number of bytes.
///
/// # Errors
/// When the value is not a size.
pub fn deserialize_bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bytes(u64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Bytes(bytes) => Ok(bytes),
        Raw::Text(text) => parse_bytes(&text).map_err(serde::de::Error::custom),
    }
}

/// Parses durations written as `250ms`, `2s`, `5m`, `1h` (or a bare number of seconds).
///
/// # Errors
/// A message saying what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 25s, 5m or 1h"))?;
    let duration = match unit.trim() {
        "ms" => Duration::from_millis(amount),
        "" | "s" => Duration::from_secs(amount),
        "m" => Duration::from_secs(amount.saturating_mul(60)),
        "h" => Duration::from_secs(amount.saturating_mul(3600)),
        other => {
            return Err(format!(
                "{text:?} has an unknown unit {other:?} (use ms, s, m or h)"
            ));
        }
    };
    Ok(duration)
}

/// Serde adapter for [`parse_duration`], accepting a string or a number of seconds.
///
/// # Errors
/// When the value is not a duration.
pub fn deserialize_duration<'de, D: Deserializer<'de>>(
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
        Raw::Text(text) => parse_duration(&text).map_err(serde::de::Error::custom),
    }
}
