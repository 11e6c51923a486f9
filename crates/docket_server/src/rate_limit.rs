//! Per-identity rate limiting: the `rate_limit:` configuration section and a
//! token-bucket [`RateLimiter`] keyed by the caller's subject.
//!
//! Each subject has a bucket holding up to `burst` tokens that refills at
//! `requests_per_minute`; a call takes one token. The bucket is stored in its
//! GCRA form (the "theoretical arrival time" of the next call), so each subject
//! costs one `Instant` and the arithmetic is exact integer `Duration` math.
//! Limits are per replica, as in the platform Docket descends from.
//!
//! The clock is passed in, so the behaviour is tested without sleeping.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// Buckets idle for this long are swept (an idle bucket is full, so dropping it
/// changes nothing).
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// The most subjects tracked at once; past it, the buckets closest to full are
/// dropped first. Subjects are authenticated identities, so this is only a
/// backstop against unbounded growth.
const MAX_TRACKED_SUBJECTS: usize = 100_000;

/// The `rate_limit:` configuration section.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RateLimitConfig {
    /// Sustained calls per minute per identity; 0 turns rate limiting off.
    pub requests_per_minute: u32,
    /// How many calls an identity may make at once after being idle.
    pub burst: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            requests_per_minute: 240,
            burst: 60,
        }
    }
}

impl RateLimitConfig {
    /// Every problem in this section, prefixed by the key path. Empty means valid.
    #[must_use]
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.requests_per_minute > 0 && self.burst == 0 {
            problems.push(
                "rate_limit.burst: must be at least 1 while requests_per_minute is above 0 \
                 (set requests_per_minute to 0 to turn rate limiting off)"
                    .to_owned(),
            );
        }
        problems
    }
}

/// A call refused by the [`RateLimiter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("rate limit exceeded; retry in {} ms", retry_after.as_millis())]
pub struct RateLimited {
    /// How long until the next call would be allowed.
    pub retry_after: Duration,
}

/// The buckets and the time they were last swept.
#[derive(Debug)]
struct Buckets {
    /// Per subject: the time at which its bucket will be full again. A call at
    /// `now` is allowed when that time, plus one call's worth, is at most
    /// `burst` calls' worth past `now`.
    full_at: HashMap<String, Instant>,
    last_sweep: Option<Instant>,
}

/// A per-identity token bucket. `Send + Sync`; memory is bounded because idle
/// buckets are evicted.
#[derive(Debug)]
pub struct RateLimiter {
    /// The time one token takes to refill; `None` when rate limiting is off.
    refill_interval: Option<Duration>,
    /// `burst` tokens' worth of time: how far `full_at` may run ahead of now.
    burst_window: Duration,
    buckets: Mutex<Buckets>,
}

impl RateLimiter {
    /// A limiter for `config`. With `requests_per_minute: 0` every call is allowed.
    #[must_use]
    pub fn new(config: &RateLimitConfig) -> Self {
        let refill_interval = (config.requests_per_minute > 0)
            .then(|| Duration::from_secs(60) / config.requests_per_minute);
        // A burst of 0 would refuse everything; the configuration check refuses
        // it, and here it means 1 so that the limiter still limits rather than blocks.
        let burst = config.burst.max(1);
        Self {
            refill_interval,
            burst_window: refill_interval.unwrap_or_default() * burst,
            buckets: Mutex::new(Buckets {
                full_at: HashMap::new(),
                last_sweep: None,
            }),
        }
    }

    /// Takes one token from `subject`'s bucket at time `now`.
    ///
    /// # Errors
    ///
    /// [`RateLimited`] when the bucket is empty; `retry_after` says how long
    /// until it holds a token again.
    pub fn check(&self, subject: &str, now: Instant) -> Result<(), RateLimited> {
        let Some(refill_interval) = self.refill_interval else {
            return Ok(());
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets.sweep(now);

        // A bucket seen for the first time is full: its full time is now.
        let full_at = buckets
            .full_at
            .get(subject)
            .copied()
            .unwrap_or(now)
            .max(now);
        let next_full_at = full_at + refill_interval;
        let allowed_from = next_full_at.checked_sub(self.burst_window).unwrap_or(now);
        if now < allowed_from {
            return Err(RateLimited {
                retry_after: allowed_from - now,
            });
        }
        match buckets.full_at.get_mut(subject) {
            Some(slot) => *slot = next_full_at,
            None => {
                buckets.make_room(now);
                buckets.full_at.insert(subject.to_owned(), next_full_at);
            }
        }
        Ok(())
    }

    /// How many subjects currently have a bucket that is not full.
    #[must_use]
    pub fn tracked_subjects(&self) -> usize {
        self.buckets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .full_at
            .len()
    }
}

impl Buckets {
    /// Drops full buckets, at most once per [`SWEEP_INTERVAL`] of `now`.
    fn sweep(&mut self, now: Instant) {
        let due = self
            .last_sweep
            .is_none_or(|last| now.saturating_duration_since(last) >= SWEEP_INTERVAL);
        if due {
            self.full_at.retain(|_, full_at| *full_at > now);
            self.last_sweep = Some(now);
        }
    }

    /// Makes room for one more subject when the table is at its bound: first
    /// by dropping full buckets, then the bucket that will be full soonest.
    fn make_room(&mut self, now: Instant) {
        if self.full_at.len() < MAX_TRACKED_SUBJECTS {
            return;
        }
        self.full_at.retain(|_, full_at| *full_at > now);
        if self.full_at.len() >= MAX_TRACKED_SUBJECTS
            && let Some(soonest) = self
                .full_at
                .iter()
                .min_by_key(|(_, full_at)| **full_at)
                .map(|(subject, _)| subject.clone())
        {
            self.full_at.remove(&soonest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(requests_per_minute: u32, burst: u32) -> RateLimiter {
        RateLimiter::new(&RateLimitConfig {
            requests_per_minute,
            burst,
        })
    }

    #[test]
    fn burst_then_refill_at_the_configured_rate() {
        // 60 per minute: one token per second; a burst of 3.
        let limiter = limiter(60, 3);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.check("alice", start), Ok(()));
        }
        assert_eq!(
            limiter.check("alice", start),
            Err(RateLimited {
                retry_after: Duration::from_secs(1)
            })
        );
        let later = start + Duration::from_millis(400);
        assert_eq!(
            limiter.check("alice", later),
            Err(RateLimited {
                retry_after: Duration::from_millis(600)
            })
        );
        // Exactly one token after one second, and not two.
        let one_second = start + Duration::from_secs(1);
        assert_eq!(limiter.check("alice", one_second), Ok(()));
        assert!(limiter.check("alice", one_second).is_err());
        // After a long idle spell the bucket is full again, but no fuller than `burst`.
        let idle = start + Duration::from_secs(3600);
        for _ in 0..3 {
            assert_eq!(limiter.check("alice", idle), Ok(()));
        }
        assert!(limiter.check("alice", idle).is_err());
    }

    #[test]
    fn sustained_rate_matches_requests_per_minute() {
        let limiter = limiter(240, 60);
        let start = Instant::now();
        let mut allowed = 0;
        // One attempt every 10 ms for two minutes.
        for tick in 0..12_000u32 {
            if limiter
                .check("bob", start + Duration::from_millis(10) * tick)
                .is_ok()
            {
                allowed += 1;
            }
        }
        // The burst, plus 240 a minute for the 119.99 s after the first call.
        assert_eq!(allowed, 60 + 479);
    }

    #[test]
    fn subjects_have_separate_buckets() {
        let limiter = limiter(60, 1);
        let now = Instant::now();
        assert!(limiter.check("alice", now).is_ok());
        assert!(limiter.check("alice", now).is_err());
        assert!(limiter.check("bob", now).is_ok());
    }

    #[test]
    fn zero_requests_per_minute_disables_limiting() {
        let limiter = limiter(0, 0);
        let now = Instant::now();
        for _ in 0..10_000 {
            assert!(limiter.check("alice", now).is_ok());
        }
        assert_eq!(limiter.tracked_subjects(), 0);
    }

    #[test]
    fn clocks_that_step_backwards_do_not_refill() {
        let limiter = limiter(60, 1);
        let now = Instant::now() + Duration::from_secs(10);
        assert!(limiter.check("alice", now).is_ok());
        // Callers on other threads may pass slightly older instants.
        let earlier = now - Duration::from_secs(5);
        assert_eq!(
            limiter.check("alice", earlier),
            Err(RateLimited {
                retry_after: Duration::from_secs(6)
            })
        );
    }

    #[test]
    fn idle_buckets_are_evicted() {
        let limiter = limiter(60, 2);
        let start = Instant::now();
        for subject in ["a", "b", "c"] {
            assert!(limiter.check(subject, start).is_ok());
        }
        assert_eq!(limiter.tracked_subjects(), 3);
        // "c" keeps calling; the others go idle and are swept after a minute.
        let later = start + SWEEP_INTERVAL;
        assert!(limiter.check("c", later - Duration::from_millis(1)).is_ok());
        assert!(limiter.check("c", later - Duration::from_millis(1)).is_ok());
        assert!(limiter.check("d", later).is_ok());
        assert_eq!(limiter.tracked_subjects(), 2);
    }

    #[test]
    fn the_table_is_bounded() {
        let limiter = limiter(1, 1);
        let now = Instant::now();
        for index in 0..MAX_TRACKED_SUBJECTS + 10 {
            assert!(limiter.check(&format!("subject-{index}"), now).is_ok());
        }
        assert_eq!(limiter.tracked_subjects(), MAX_TRACKED_SUBJECTS);
    }

    #[test]
    fn config_defaults_and_problems() {
        let config: RateLimitConfig = serde_json::from_str("{}").unwrap_or(RateLimitConfig {
            requests_per_minute: 0,
            burst: 0,
        });
        assert_eq!(config, RateLimitConfig::default());
        assert_eq!((config.requests_per_minute, config.burst), (240, 60));
        assert!(config.problems().is_empty());
        let no_burst = RateLimitConfig {
            requests_per_minute: 10,
            burst: 0,
        };
        assert_eq!(no_burst.problems().len(), 1);
        assert!(
            RateLimitConfig {
                requests_per_minute: 0,
                burst: 0
            }
            .problems()
            .is_empty()
        );
    }

    #[test]
    fn limiter_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RateLimiter>();
    }
}
