//! [`Cadence`]: a schedule's cron expression read in its IANA time zone, and
//! the fire-time arithmetic the scheduler needs — the next fire after an
//! instant, and which fire is due after downtime (the latest, with the count
//! of those it stands for).
//!
//! Expressions have five fields (minute, hour, day of month, month, day of
//! week) or are a descriptor (`@hourly`, `@daily`, `@weekly`, `@monthly`,
//! `@yearly`); a seconds field is refused, so a schedule fires at most once a
//! minute. Parsing and the calendar are the `croner` crate's, zones are
//! `chrono-tz`'s (the IANA database compiled in).
//!
//! Daylight saving time, as `croner` implements it (the rule Vixie cron and
//! the Open Cron Pattern Specification give):
//! - a wall-clock time that does not exist (the hour skipped in spring): an
//!   expression with a fixed minute and hour (`30 2 * * *`) fires at the
//!   first minute after the gap (03:00 that day); one with a wildcard or step
//!   in its minute or hour fields simply has no fires inside the gap;
//! - a wall-clock time that happens twice (the hour repeated in autumn): a
//!   fixed-time expression fires once, at the first of the two; a wildcard or
//!   step expression fires in both passes of the hour.
//!
//! Fire times are instants; they are stored and compared in UTC.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use time::OffsetDateTime;

/// How many missed fires [`Cadence::due`] counts one by one before it jumps
/// to the latest and stops counting (a per-minute schedule after ten weeks
/// of downtime).
pub const MAX_COUNTED_MISSES: i64 = 100_000;

/// The longest cron expression (and time-zone name) accepted, in bytes: five
/// fields with generous lists fit, a megabyte of them is not stored.
pub const MAX_EXPRESSION: usize = 256;

/// Why an expression or a zone was refused.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CadenceError {
    /// The cron expression does not parse.
    #[error(
        "the cron expression {expression:?} is not valid: {reason}; use five fields (minute hour day-of-month month day-of-week, e.g. \"0 6 * * 1-5\") or @hourly, @daily, @weekly, @monthly, @yearly"
    )]
    Expression {
        /// The expression.
        expression: String,
        /// What the parser said.
        reason: String,
    },
    /// The time zone is not in the IANA database.
    #[error(
        "the time zone {0:?} is not an IANA time zone name; use one such as \"UTC\", \"Europe/Berlin\" or \"America/New_York\""
    )]
    Zone(String),
    /// The expression never matches a real date (`0 0 30 2 *`).
    #[error("the cron expression {0:?} never fires")]
    Never(String),
}

/// A parsed schedule: when it fires.
#[derive(Clone, Debug)]
pub struct Cadence {
    cron: Cron,
    zone: Tz,
    expression: String,
}

/// The fire a schedule owes at some instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// The fire time to fire for: the latest one at or before now.
    pub fire_time: OffsetDateTime,
    /// How many fire times before it passed unfired (at most
    /// [`MAX_COUNTED_MISSES`]).
    pub missed: i64,
    /// The fire time after now, which the schedule waits for next.
    pub next: OffsetDateTime,
}

fn to_chrono(instant: OffsetDateTime) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(instant.unix_timestamp(), instant.nanosecond())
        .single()
}

fn from_chrono<Z: TimeZone>(instant: &DateTime<Z>) -> Option<OffsetDateTime> {
    let utc = instant.with_timezone(&Utc);
    OffsetDateTime::from_unix_timestamp(utc.timestamp())
        .ok()?
        .replace_nanosecond(utc.timestamp_subsec_nanos())
        .ok()
}

impl Cadence {
    /// Reads `expression` in the IANA zone `timezone`; either is at most
    /// [`MAX_EXPRESSION`] bytes.
    ///
    /// # Errors
    /// [`CadenceError::Expression`] for an expression that does not parse or
    /// has a seconds or years field, [`CadenceError::Zone`] for an unknown
    /// zone.
    pub fn parse(expression: &str, timezone: &str) -> Result<Self, CadenceError> {
        if expression.len() > MAX_EXPRESSION || timezone.len() > MAX_EXPRESSION {
            return Err(CadenceError::Expression {
                expression: expression.chars().take(32).collect::<String>() + "…",
                reason: format!(
                    "a cron expression and a time zone are at most {MAX_EXPRESSION} bytes"
                ),
            });
        }
        let zone = Tz::from_str(timezone).map_err(|_| CadenceError::Zone(timezone.to_owned()))?;
        let trimmed = expression.trim();
        let refuse = |reason: String| CadenceError::Expression {
            expression: expression.to_owned(),
            reason,
        };
        if !trimmed.starts_with('@') && trimmed.split_whitespace().count() != 5 {
            return Err(refuse(format!(
                "it has {} fields, not 5 (a schedule fires at most once a minute, so there is no seconds field)",
                trimmed.split_whitespace().count()
            )));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(trimmed)
            .map_err(|error| refuse(error.to_string()))?;
        Ok(Self {
            cron,
            zone,
            expression: trimmed.to_owned(),
        })
    }

    /// The expression as parsed.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone's name.
    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    /// The first fire time strictly after `instant`; `None` when there is
    /// none (the expression never matches again).
    pub fn next_after(&self, instant: OffsetDateTime) -> Option<OffsetDateTime> {
        let start = to_chrono(instant)?.with_timezone(&self.zone);
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        from_chrono(&next)
    }

    /// The date of `instant` in the cadence's zone, as `YYYY-MM-DD`.
    pub fn local_date(&self, instant: OffsetDateTime) -> String {
        to_chrono(instant).map_or_else(
            || instant.date().to_string(),
            |at| at.with_timezone(&self.zone).format("%Y-%m-%d").to_string(),
        )
    }

    /// The first `count` fire times after `instant`.
    pub fn upcoming(&self, instant: OffsetDateTime, count: usize) -> Vec<OffsetDateTime> {
        let mut times = Vec::with_capacity(count);
        let mut at = instant;
        while times.len() < count {
            let Some(next) = self.next_after(at) else {
                break;
            };
            times.push(next);
            at = next;
        }
        times
    }

    /// The first fire time after `instant`, or the refusal of an expression
    /// that never fires.
    ///
    /// # Errors
    /// [`CadenceError::Never`].
    pub fn first_after(&self, instant: OffsetDateTime) -> Result<OffsetDateTime, CadenceError> {
        self.next_after(instant)
            .ok_or_else(|| CadenceError::Never(self.expression.clone()))
    }

    /// What a schedule waiting for `waiting_for` owes at `now`: nothing while
    /// `waiting_for` is still ahead; otherwise the latest fire time at or
    /// before `now` (fire-once-latest), how many before it were missed, and
    /// the next one. `None` also when the expression has no next fire.
    pub fn due(&self, waiting_for: OffsetDateTime, now: OffsetDateTime) -> Option<Due> {
        if waiting_for > now {
            return None;
        }
        let mut fire_time = waiting_for;
        let mut missed = 0;
        loop {
            let next = self.next_after(fire_time)?;
            if next > now {
                return Some(Due {
                    fire_time,
                    missed,
                    next,
                });
            }
            fire_time = next;
            missed += 1;
            if missed >= MAX_COUNTED_MISSES {
                // Jump to the latest fire at or before now without counting.
                let at = to_chrono(now)?.with_timezone(&self.zone);
                let latest = self.cron.find_previous_occurrence(&at, true).ok()?;
                let latest = from_chrono(&latest)?.max(fire_time);
                let next = self.next_after(latest)?;
                return Some(Due {
                    fire_time: latest,
                    missed,
                    next,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use time::macros::datetime;

    fn cadence(expression: &str, zone: &str) -> Cadence {
        Cadence::parse(expression, zone).expect("parses")
    }

    #[test]
    fn five_fields_and_descriptors_parse_others_are_refused_clearly() {
        assert!(Cadence::parse("*/5 * * * *", "UTC").is_ok());
        assert!(Cadence::parse("@hourly", "Europe/Berlin").is_ok());
        assert!(Cadence::parse("0 6 * * MON-FRI", "America/New_York").is_ok());
        let seconds = Cadence::parse("0 */5 * * * *", "UTC").expect_err("seconds");
        assert!(seconds.to_string().contains("not 5"), "{seconds}");
        let bad = Cadence::parse("61 * * * *", "UTC").expect_err("minute 61");
        assert!(matches!(bad, CadenceError::Expression { .. }), "{bad}");
        assert!(bad.to_string().contains("five fields"), "{bad}");
        let zone = Cadence::parse("* * * * *", "Mars/Olympus").expect_err("zone");
        assert_eq!(zone, CadenceError::Zone("Mars/Olympus".into()));
        // A valid but enormous list is refused by its length, and not echoed whole.
        let minutes = vec!["0"; 200].join(",");
        let long = Cadence::parse(&format!("{minutes} * * * *"), "UTC").expect_err("long");
        assert!(long.to_string().contains("at most 256 bytes"), "{long}");
        assert!(long.to_string().len() < 400, "{long}");
    }

    #[test]
    fn next_fires_follow_the_zone() {
        // 06:00 in Berlin is 05:00 UTC in winter and 04:00 UTC in summer.
        let daily = cadence("0 6 * * *", "Europe/Berlin");
        assert_eq!(
            daily.upcoming(datetime!(2026-01-10 12:00 UTC), 2),
            vec![
                datetime!(2026-01-11 05:00 UTC),
                datetime!(2026-01-12 05:00 UTC)
            ]
        );
        assert_eq!(
            daily.next_after(datetime!(2026-07-10 12:00 UTC)),
            Some(datetime!(2026-07-11 04:00 UTC))
        );
    }

    #[test]
    fn the_skipped_hour_moves_a_fixed_time_fire_to_the_gaps_end() {
        // Berlin skips 02:00-03:00 on 2026-03-29: 02:30 does not exist.
        let fixed = cadence("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            fixed.next_after(datetime!(2026-03-28 12:00 UTC)),
            Some(datetime!(2026-03-29 01:00 UTC)) // 03:00 CEST
        );
        // A wildcard-hour schedule has no fires inside the gap.
        let every_half_hour = cadence("*/30 * * * *", "Europe/Berlin");
        assert_eq!(
            every_half_hour.upcoming(datetime!(2026-03-29 00:15 UTC), 2),
            vec![
                datetime!(2026-03-29 00:30 UTC),
                datetime!(2026-03-29 01:00 UTC)
            ]
        );
    }

    #[test]
    fn the_repeated_hour_fires_a_fixed_time_once_and_a_wildcard_twice() {
        // Berlin repeats 02:00-03:00 on 2026-10-25 (CEST 00:00-01:00 UTC, then
        // CET 01:00-02:00 UTC).
        let fixed = cadence("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            fixed.upcoming(datetime!(2026-10-24 12:00 UTC), 2),
            vec![
                datetime!(2026-10-25 00:30 UTC),
                datetime!(2026-10-26 01:30 UTC)
            ]
        );
        let hourly_at_half = cadence("30 * * * *", "Europe/Berlin");
        assert_eq!(
            hourly_at_half.upcoming(datetime!(2026-10-24 23:45 UTC), 3),
            vec![
                datetime!(2026-10-25 00:30 UTC),
                datetime!(2026-10-25 01:30 UTC),
                datetime!(2026-10-25 02:30 UTC),
            ]
        );
    }

    #[test]
    fn after_downtime_the_latest_fire_is_due_with_the_count_missed() {
        let every_minute = cadence("* * * * *", "UTC");
        assert_eq!(
            every_minute.due(
                datetime!(2026-01-01 10:05 UTC),
                datetime!(2026-01-01 10:04:59 UTC)
            ),
            None
        );
        assert_eq!(
            every_minute.due(
                datetime!(2026-01-01 10:05 UTC),
                datetime!(2026-01-01 10:05:30 UTC)
            ),
            Some(Due {
                fire_time: datetime!(2026-01-01 10:05 UTC),
                missed: 0,
                next: datetime!(2026-01-01 10:06 UTC),
            })
        );
        // Down from 10:05 to 10:17:10: 10:17 fires, 12 fires before it were missed.
        assert_eq!(
            every_minute.due(
                datetime!(2026-01-01 10:05 UTC),
                datetime!(2026-01-01 10:17:10 UTC)
            ),
            Some(Due {
                fire_time: datetime!(2026-01-01 10:17 UTC),
                missed: 12,
                next: datetime!(2026-01-01 10:18 UTC),
            })
        );
    }

    #[test]
    fn a_very_long_outage_stops_counting_but_still_fires_the_latest() {
        let every_minute = cadence("* * * * *", "UTC");
        let due = every_minute
            .due(
                datetime!(2026-01-01 00:00 UTC),
                datetime!(2026-12-01 00:00:30 UTC),
            )
            .expect("due");
        assert_eq!(due.fire_time, datetime!(2026-12-01 00:00 UTC));
        assert_eq!(due.missed, MAX_COUNTED_MISSES);
        assert_eq!(due.next, datetime!(2026-12-01 00:01 UTC));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Any text as an expression or zone is either refused with an error
        /// or parses into a cadence whose next fires strictly increase, fall
        /// on whole minutes, and are at least a minute apart.
        #[test]
        fn any_expression_parses_or_is_refused(
            fields in prop::collection::vec("[0-9*/,\\-A-Za-z@#LW?]{1,6}", 0..7),
            zone in prop::sample::select(vec!["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Nowhere/Land", ""]),
            start in 1_700_000_000i64..1_900_000_000i64,
        ) {
            let expression = fields.join(" ");
            if let Ok(parsed) = Cadence::parse(&expression, zone) {
                let start = OffsetDateTime::from_unix_timestamp(start).expect("in range");
                let times = parsed.upcoming(start, 3);
                let mut previous = start;
                for time in times {
                    prop_assert!(time > previous);
                    prop_assert_eq!(time.second(), 0);
                    previous = time;
                }
            }
        }

        /// Fire-once-latest: the due fire is at or before now, the next after
        /// now, and waiting for the next fire after it owes nothing until then.
        #[test]
        fn the_due_fire_is_the_latest_before_now(
            minute in 0u8..60,
            step in prop::sample::select(vec![1u8, 5, 15]),
            waited_minutes in 0i64..500,
        ) {
            let expression = format!("{minute}-59/{step} * * * *");
            let parsed = Cadence::parse(&expression, "Europe/Berlin").expect("parses");
            let first = parsed.next_after(datetime!(2026-03-28 22:00 UTC)).expect("fires");
            let now = first + time::Duration::minutes(waited_minutes) + time::Duration::seconds(7);
            let due = parsed.due(first, now).expect("due");
            prop_assert!(due.fire_time <= now);
            prop_assert!(due.next > now);
            prop_assert_eq!(parsed.next_after(due.fire_time), Some(due.next));
            prop_assert_eq!(parsed.due(due.next, now), None);
            prop_assert_eq!(
                i64::try_from(parsed.upcoming(first - time::Duration::seconds(1), 1000).into_iter().take_while(|t| *t < due.fire_time).count()).unwrap_or(0),
                due.missed
            );
        }
    }
}
