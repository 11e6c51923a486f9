//! The scheduler's clock: [`SystemClock`] in production, and
//! [`ManualClock`], which tests move by hand so a schedule test covers an
//! hour of fires in milliseconds without sleeping through it.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;
use tokio::sync::Notify;

use crate::replica::lock;

/// What the scheduler reads the time from and waits on.
#[async_trait]
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> OffsetDateTime;

    /// Waits until this clock shows `deadline` or later. An instant, not a
    /// duration: a wait computed from a reading taken earlier would start late
    /// by whatever the clock moved in between (for a clock that then stands
    /// still, forever).
    async fn sleep_until(&self, deadline: OffsetDateTime);
}

/// The operating system's clock and tokio's timer.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    async fn sleep_until(&self, deadline: OffsetDateTime) {
        let left = Duration::try_from(deadline - OffsetDateTime::now_utc()).unwrap_or_default();
        tokio::time::sleep(left).await;
    }
}

/// A clock that stands still until a test moves it ([`ManualClock::advance`],
/// [`ManualClock::set`]); a sleeper wakes once the clock has moved past its
/// wake-up time.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<OffsetDateTime>,
    moved: Notify,
}

impl ManualClock {
    /// A clock showing `start`.
    pub fn new(start: OffsetDateTime) -> Self {
        Self {
            now: Mutex::new(start),
            moved: Notify::new(),
        }
    }

    /// Moves the clock forward by `duration` and wakes the sleepers it passed.
    pub fn advance(&self, duration: Duration) {
        let step = time::Duration::try_from(duration).unwrap_or(time::Duration::MAX);
        {
            let mut now = lock(&self.now);
            *now = now.saturating_add(step);
        }
        self.moved.notify_waiters();
    }

    /// Sets the clock to `instant` (forward or back) and wakes the sleepers.
    pub fn set(&self, instant: OffsetDateTime) {
        *lock(&self.now) = instant;
        self.moved.notify_waiters();
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *lock(&self.now)
    }

    async fn sleep_until(&self, deadline: OffsetDateTime) {
        loop {
            // Registered before the check, so a move between the two is heard.
            let moved = self.moved.notified();
            if self.now() >= deadline {
                return;
            }
            moved.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use time::macros::datetime;

    #[tokio::test]
    async fn a_sleeper_wakes_when_the_clock_passes_its_time() {
        let clock = Arc::new(ManualClock::new(datetime!(2026-01-01 00:00 UTC)));
        let sleeper = tokio::spawn({
            let clock = Arc::clone(&clock);
            async move {
                clock.sleep_until(datetime!(2026-01-01 00:01 UTC)).await;
            }
        });
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(30));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_secs(30));
        tokio::time::timeout(Duration::from_secs(10), sleeper)
            .await
            .expect("woke (hang guard)")
            .expect("joined");
        assert_eq!(clock.now(), datetime!(2026-01-01 00:01 UTC));
    }
}
