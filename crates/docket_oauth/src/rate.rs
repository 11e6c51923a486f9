//! Per-IP token buckets for `/register`, `/authorize` and `/token`, per
//! replica (an IPv6 address counts as its /64). The map is bounded: past [`MAX_TRACKED`] buckets, the ones
//! that have refilled are dropped, and if that is not enough every new
//! address shares one overflow bucket (so a flood from many addresses is
//! limited together rather than growing memory).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::RateLimits;

/// The most buckets (an address at an endpoint) tracked at once.
pub const MAX_TRACKED: usize = 10_000;

/// The endpoints that are limited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limited {
    /// `POST /oauth/register`.
    Register,
    /// `GET /oauth/authorize`, the callback and the consent.
    Authorize,
    /// `POST /oauth/token` and `/oauth/revoke`.
    Token,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// The limiter of one replica.
#[derive(Debug)]
pub struct RateLimiter {
    limits: RateLimits,
    buckets: Mutex<HashMap<(Limited, Option<IpAddr>), Bucket>>,
}

impl RateLimiter {
    /// A limiter with these per-minute limits.
    #[must_use]
    pub fn new(limits: RateLimits) -> Self {
        Self {
            limits,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn per_minute(&self, endpoint: Limited) -> f64 {
        f64::from(match endpoint {
            Limited::Register => self.limits.register,
            Limited::Authorize => self.limits.authorize,
            Limited::Token => self.limits.token,
        })
    }

    /// Spends one request of `peer` at `endpoint`: `Ok(())`, or how long until
    /// the next one is allowed.
    ///
    /// # Errors
    /// The wait, when the bucket is empty.
    pub fn check(&self, endpoint: Limited, peer: IpAddr) -> Result<(), Duration> {
        let capacity = self.per_minute(endpoint);
        let per_second = capacity / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let mut key = (endpoint, Some(bucket_address(peer)));
        if !buckets.contains_key(&key) && buckets.len() >= MAX_TRACKED {
            buckets.retain(|(_, _), bucket| {
                let refilled =
                    bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() * per_second;
                refilled < capacity
            });
            if buckets.len() >= MAX_TRACKED {
                key = (endpoint, None);
            }
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: capacity,
            updated: now,
        });
        let elapsed = now.duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(capacity);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - bucket.tokens) / per_second;
            Err(Duration::from_secs_f64(wait.max(1.0)))
        }
    }
}

/// The address a bucket is kept for: an IPv4 address, or an IPv6 address's
/// /64 (one host usually holds a whole /64, and could otherwise take a new
/// bucket per address).
fn bucket_address(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let segments = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(
                    segments[0],
                    segments[1],
                    segments[2],
                    segments[3],
                    0,
                    0,
                    0,
                    0,
                ))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_empties_and_names_its_wait() {
        let limiter = RateLimiter::new(RateLimits {
            register: 2,
            authorize: 60,
            token: 60,
        });
        let peer: IpAddr = [192, 0, 2, 1].into();
        assert!(limiter.check(Limited::Register, peer).is_ok());
        assert!(limiter.check(Limited::Register, peer).is_ok());
        let wait = limiter.check(Limited::Register, peer).expect_err("limited");
        assert!(wait >= Duration::from_secs(1));
        assert!(limiter.check(Limited::Token, peer).is_ok());
        assert!(
            limiter
                .check(Limited::Register, [192, 0, 2, 2].into())
                .is_ok()
        );
    }
}
