//! The `date` module's arithmetic on `YYYY-MM-DD` strings, as the original platform offers it:
//! pure functions of their arguments, and deliberately no `now()` or `today()`.

use time::format_description::well_known::Rfc3339;
use time::{Date, Duration, Month, OffsetDateTime};

/// Reads a `YYYY-MM-DD` date.
fn parse_date(function: &str, value: &str) -> Result<Date, String> {
    let invalid = || format!("in date.{function}: {value:?} is not a date in YYYY-MM-DD form");
    let mut parts = value.split('-');
    let (Some(year), Some(month), Some(day), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid());
    };
    if year.len() != 4 || month.len() != 2 || day.len() != 2 {
        return Err(invalid());
    }
    let number = |text: &str| {
        if text.bytes().all(|byte| byte.is_ascii_digit()) {
            text.parse::<u16>().ok()
        } else {
            None
        }
    };
    let (Some(year), Some(month), Some(day)) = (number(year), number(month), number(day)) else {
        return Err(invalid());
    };
    let month = u8::try_from(month)
        .ok()
        .and_then(|month| Month::try_from(month).ok())
        .ok_or_else(invalid)?;
    let day = u8::try_from(day).map_err(|_| invalid())?;
    Date::from_calendar_date(i32::from(year), month, day).map_err(|_| invalid())
}

/// Writes a date as `YYYY-MM-DD`.
fn format_date(date: Date) -> String {
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// `days` as a duration, or `None` when it is further than any date can move (which would
/// overflow `Duration`).
fn days(days: i64) -> Option<Duration> {
    const MAX_DAYS: i64 = 10_000 * 366;
    (-MAX_DAYS..=MAX_DAYS)
        .contains(&days)
        .then(|| Duration::days(days))
}

/// The date outside the supported range.
fn out_of_range(function: &str) -> String {
    format!("in date.{function}: the result is outside the supported range of dates")
}

/// `date.of(value)`: the UTC calendar date of an RFC 3339 timestamp; a date is returned as it is.
pub(crate) fn of(value: &str) -> Result<String, String> {
    match OffsetDateTime::parse(value, &Rfc3339) {
        Ok(instant) => Ok(format_date(instant.to_offset(time::UtcOffset::UTC).date())),
        Err(_) => parse_date("of", value).map(format_date).map_err(|_| {
            format!("in date.of: {value:?} is neither an RFC 3339 timestamp nor a YYYY-MM-DD date")
        }),
    }
}

/// `date.parse(value)`: the date, checked and normalized.
pub(crate) fn parse(value: &str) -> Result<String, String> {
    parse_date("parse", value).map(format_date)
}

/// `date.format(value, layout)`: `YYYY`, `MM` and `DD` in `layout` replaced by the date's parts.
pub(crate) fn format(value: &str, layout: &str) -> Result<String, String> {
    let date = parse_date("format", value)?;
    Ok(layout
        .replace("YYYY", &format!("{:04}", date.year()))
        .replace("MM", &format!("{:02}", u8::from(date.month())))
        .replace("DD", &format!("{:02}", date.day())))
}

/// `date.add_days(value, days)`.
pub(crate) fn add_days(value: &str, count: i64) -> Result<String, String> {
    let date = parse_date("add_days", value)?;
    days(count)
        .and_then(|duration| date.checked_add(duration))
        .map(format_date)
        .ok_or_else(|| out_of_range("add_days"))
}

/// `date.add_months(value, months)`: like the original, a day past the end of the target month
/// rolls over into the next (31 January plus one month is 3 March in a common year).
pub(crate) fn add_months(value: &str, months: i64) -> Result<String, String> {
    let date = parse_date("add_months", value)?;
    let month_index = (i64::from(date.year()) * 12 + i64::from(u8::from(date.month())) - 1)
        .checked_add(months)
        .ok_or_else(|| out_of_range("add_months"))?;
    let year = i32::try_from(month_index.div_euclid(12)).map_err(|_| out_of_range("add_months"))?;
    let month = u8::try_from(month_index.rem_euclid(12) + 1)
        .ok()
        .and_then(|month| Month::try_from(month).ok())
        .ok_or_else(|| out_of_range("add_months"))?;
    Date::from_calendar_date(year, month, 1)
        .ok()
        .and_then(|first| first.checked_add(Duration::days(i64::from(date.day()) - 1)))
        .map(format_date)
        .ok_or_else(|| out_of_range("add_months"))
}

/// `date.diff_days(start, end)`: whole days from `start` to `end`, negative when `end` is
/// earlier.
pub(crate) fn diff_days(start: &str, end: &str) -> Result<i64, String> {
    let start = parse_date("diff_days", start)?;
    let end = parse_date("diff_days", end)?;
    Ok((end - start).whole_days())
}

/// `date.start_of_month(value)`.
pub(crate) fn start_of_month(value: &str) -> Result<String, String> {
    let date = parse_date("start_of_month", value)?;
    date.replace_day(1)
        .map(format_date)
        .map_err(|_| out_of_range("start_of_month"))
}

/// `date.weekday(value)`: the lower-case English name of the day.
pub(crate) fn weekday(value: &str) -> Result<String, String> {
    let date = parse_date("weekday", value)?;
    Ok(date.weekday().to_string().to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_takes_the_utc_date_of_a_timestamp_or_keeps_a_date() {
        assert_eq!(of("2026-03-01T01:30:00+02:00").as_deref(), Ok("2026-02-28"));
        assert_eq!(of("2026-03-01").as_deref(), Ok("2026-03-01"));
        assert!(of("yesterday").is_err());
    }

    #[test]
    fn parse_refuses_what_is_not_a_date() {
        assert_eq!(parse("2024-02-29").as_deref(), Ok("2024-02-29"));
        for bad in [
            "2023-02-29",
            "2024-2-01",
            "24-02-01",
            "2024-02-01x",
            "+024-02-01",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn arithmetic_matches_the_original() {
        assert_eq!(add_days("2026-01-01", -1).as_deref(), Ok("2025-12-31"));
        assert_eq!(add_months("2023-01-31", 1).as_deref(), Ok("2023-03-03"));
        assert_eq!(add_months("2026-03-15", -3).as_deref(), Ok("2025-12-15"));
        assert_eq!(diff_days("2026-03-01", "2026-02-01"), Ok(-28));
        assert_eq!(start_of_month("2026-02-17").as_deref(), Ok("2026-02-01"));
        assert_eq!(weekday("2026-11-30").as_deref(), Ok("monday"));
        assert_eq!(
            format("2026-02-07", "DD/MM/YYYY").as_deref(),
            Ok("07/02/2026")
        );
    }

    #[test]
    fn results_out_of_range_are_errors_not_panics() {
        assert!(add_days("9999-12-31", i64::MAX).is_err());
        assert!(add_months("9999-12-31", i64::MAX / 2).is_err());
        assert!(add_months("2000-01-01", i64::MAX).is_err());
        assert!(add_days("2000-01-01", i64::MIN).is_err());
    }
}
