//! What one identity holds of the server at once, so that no caller can take every
//! connection from the others: the requests it has in flight (a slow upload, a slow
//! tool, a download) and, among them, its long-lived streams (`subscriptions/listen`,
//! a 2025-11-25 `tasks/result`), which live as long as the client wants.
//!
//! Each request takes a [`Hold`] once its caller is known and gives it back when its
//! answer is done (a stream's hold goes with the stream's body). An identity holds at
//! most `server.max_connection_share_percent` of `server.max_connections` at once, and
//! at most `server.max_streams_per_identity` streams; past either, the request is
//! refused at once with a message that names the limit. Counts are per replica, as
//! the connections they protect are. Anonymous callers share one subject, so together
//! they hold one identity's share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The counts of one identity.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    /// Requests in flight, streams included.
    requests: u32,
    /// Of those, the long-lived streams.
    streams: u32,
}

/// The counts of every identity that holds anything now (an identity that holds
/// nothing has no entry, so the map is as large as the requests in flight).
#[derive(Debug)]
pub(crate) struct Holds {
    held: Arc<Mutex<HashMap<String, Held>>>,
    /// The most requests one identity may have in flight.
    max_requests: u32,
    /// The most streams one identity may have open.
    max_streams: u32,
}

/// Why a hold was refused; the message names the limit and the setting.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HoldRefused {
    /// The identity has its share of the server's connections in flight.
    #[error(
        "you already have {0} requests in flight, the most one identity may hold of this \
         server's connections (server.max_connection_share_percent of server.max_connections); \
         wait for one to finish"
    )]
    Requests(u32),
    /// The identity has its streams open.
    #[error(
        "you already have {0} streams open (subscriptions/listen, tasks/result), the most one \
         identity may (server.max_streams_per_identity); close one, or follow several tasks \
         on one listen"
    )]
    Streams(u32),
}

impl Holds {
    /// Counts for a server of `max_connections`, an identity holding at most
    /// `share_percent` of them (at least one) and `max_streams` streams.
    pub(crate) fn new(max_connections: usize, share_percent: u8, max_streams: u32) -> Self {
        let share = max_connections.saturating_mul(usize::from(share_percent)) / 100;
        Self {
            held: Arc::default(),
            max_requests: u32::try_from(share.max(1)).unwrap_or(u32::MAX),
            max_streams,
        }
    }

    /// Takes one request's hold for `subject`.
    ///
    /// # Errors
    /// [`HoldRefused::Requests`] when the subject has its share in flight.
    pub(crate) fn enter(&self, subject: &str) -> Result<Hold, HoldRefused> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = held.entry(subject.to_owned()).or_default();
        // `max_requests` is at least one, so a refused subject holds something and
        // its entry is not left empty.
        if counts.requests >= self.max_requests {
            return Err(HoldRefused::Requests(counts.requests));
        }
        counts.requests += 1;
        Ok(Hold {
            held: Arc::clone(&self.held),
            subject: subject.to_owned(),
            stream: false,
            max_streams: self.max_streams,
        })
    }

    /// How many requests and streams `subject` holds now.
    #[cfg(test)]
    fn counts(&self, subject: &str) -> (u32, u32) {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get(subject)
            .map_or((0, 0), |counts| (counts.requests, counts.streams))
    }
}

/// One request's place among its identity's holds; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct Hold {
    held: Arc<Mutex<HashMap<String, Held>>>,
    subject: String,
    stream: bool,
    max_streams: u32,
}

impl Hold {
    /// Counts this request as a long-lived stream too (idempotent).
    ///
    /// # Errors
    /// [`HoldRefused::Streams`] when the identity has its streams open.
    pub(crate) fn open_stream(&mut self) -> Result<(), HoldRefused> {
        if self.stream {
            return Ok(());
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = held.entry(self.subject.clone()).or_default();
        if counts.streams >= self.max_streams {
            return Err(HoldRefused::Streams(counts.streams));
        }
        counts.streams += 1;
        self.stream = true;
        Ok(())
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(counts) = held.get_mut(&self.subject) {
            counts.requests = counts.requests.saturating_sub(1);
            if self.stream {
                counts.streams = counts.streams.saturating_sub(1);
            }
            if counts.requests == 0 {
                held.remove(&self.subject);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_holds_its_share_and_its_streams_and_no_more() {
        // 40 connections, a quarter each: 10 requests; 3 streams.
        let holds = Holds::new(40, 25, 3);
        let mut alice: Vec<Hold> = (0..10)
            .map(|_| holds.enter("alice").expect("within the share"))
            .collect();
        assert_eq!(holds.enter("alice").err(), Some(HoldRefused::Requests(10)));
        // Another identity is not held back by alice.
        let bob = holds.enter("bob").expect("bob has his own share");
        for hold in alice.iter_mut().take(3) {
            hold.open_stream().expect("within the streams");
            hold.open_stream().expect("a stream counted once");
        }
        assert_eq!(alice[3].open_stream(), Err(HoldRefused::Streams(3)));
        assert_eq!(holds.counts("alice"), (10, 3));
        // Giving back a stream's hold frees a request and a stream.
        alice.remove(0);
        assert_eq!(holds.counts("alice"), (9, 2));
        alice[3].open_stream().expect("a stream is free again");
        drop(alice);
        drop(bob);
        assert_eq!(holds.counts("alice"), (0, 0));
        assert!(
            holds.held.lock().expect("lock").is_empty(),
            "nothing is kept"
        );
        // A share below one connection is still one.
        let tiny = Holds::new(1, 1, 0);
        let one = tiny.enter("carol").expect("one");
        assert!(tiny.enter("carol").is_err());
        drop(one);
    }
}
