//! Calls that arrive together share one statement.
//!
//! Clients poll `tasks/get` and create tasks many at once. Each is one short
//! statement, and on a busy server most of a statement's cost is its own (a
//! round trip, a wake-up of the PostgreSQL backend, an executor start, and for
//! a write its commit's flush), not the row's. So such a call does not take a
//! connection of its own: it joins a queue, and whichever waiting call first
//! holds one of a few leader permits takes the queue and runs one statement for
//! all of it. Alone, a call leads itself at once and runs the single-row
//! statement: nothing waits for company. Under load the queue fills while the
//! statements run, and the next one carries all of it.
//!
//! Every call in a batch sees the database as it was after the call joined the
//! queue, as its own statement would have: the batch's statement starts after
//! the leader took the queue. A batch that carries any call but the leader's
//! own runs as a task of its own, so a leader whose caller goes away
//! mid-statement does not take the others' answers with it.
//!
//! No call is left in the queue without a leader: a call leaves its wait only
//! with its answer or as a leader, and a leader takes batches from the front
//! until it has taken its own call (or found it gone), so every call still
//! queued has its own caller waiting for a permit, or no caller at all.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::{Semaphore, oneshot};

/// The queue of calls of one kind waiting for a statement, and the permits of
/// their leaders.
pub(crate) struct Batches<T, R> {
    queue: Mutex<Queue<T, R>>,
    leaders: Semaphore,
    most: usize,
    statements: AtomicU64,
}

/// The calls waiting, first come first, each with a ticket one above the last.
struct Queue<T, R> {
    waiting: Vec<Waiter<T, R>>,
    tickets: u64,
}

/// One call in the queue: its ticket, its input, and where its answer goes.
struct Waiter<T, R> {
    ticket: u64,
    input: T,
    answer: oneshot::Sender<R>,
}

/// How many calls a store was asked for, and how many statements served them:
/// their ratio is how many calls a statement carried on average.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SharedStatements {
    /// Calls asked for.
    pub calls: u64,
    /// Statements that answered them. A batch of creates refused as a
    /// duplicate is inserted again one by one, and still counts once.
    pub statements: u64,
}

impl<T: Send + 'static, R: Send + 'static> Batches<T, R> {
    /// At most `leaders` statements at once, each for at most `most` calls.
    ///
    /// Few leaders, so that calls arriving while statements run gather into the
    /// next one; more than one, so that one slow statement does not hold every
    /// call up.
    pub(crate) fn new(leaders: usize, most: usize) -> Self {
        Self {
            queue: Mutex::new(Queue {
                waiting: Vec::new(),
                tickets: 0,
            }),
            leaders: Semaphore::new(leaders.max(1)),
            most: most.max(1),
            statements: AtomicU64::new(0),
        }
    }

    /// Runs `input` through `run`, alone or in a batch with the calls that
    /// arrived with it. `run` answers a batch's inputs in their order.
    ///
    /// `None` only when the statement carrying this call stopped without an
    /// answer (it panicked, or the runtime is shutting down).
    pub(crate) async fn call<F, Fut>(&self, input: T, run: F) -> Option<R>
    where
        F: Fn(Vec<T>) -> Fut,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        let (answer, mut answered) = oneshot::channel();
        let ticket = {
            let mut queue = self.queue();
            queue.tickets += 1;
            let ticket = queue.tickets;
            queue.waiting.push(Waiter {
                ticket,
                input,
                answer,
            });
            ticket
        };
        let answer = tokio::select! {
            biased;
            answer = &mut answered => answer,
            permit = self.leaders.acquire() => {
                {
                    let _permit = permit;
                    self.lead(ticket, &run).await;
                }
                answered.await
            }
        };
        answer.ok()
    }

    /// The calls and statements so far.
    pub(crate) fn shared(&self) -> SharedStatements {
        SharedStatements {
            calls: self.queue().tickets,
            statements: self.statements.load(Ordering::Relaxed),
        }
    }

    /// Runs batches from the front of the queue until the call with `ticket`
    /// has been taken.
    async fn lead<F, Fut>(&self, ticket: u64, run: &F)
    where
        F: Fn(Vec<T>) -> Fut,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        loop {
            let batch = {
                let mut queue = self.queue();
                let take = queue.waiting.len().min(self.most);
                queue.waiting.drain(..take).collect::<Vec<_>>()
            };
            let Some(last) = batch.last().map(|waiter| waiter.ticket) else {
                return;
            };
            self.statements.fetch_add(1, Ordering::Relaxed);
            let (inputs, answers): (Vec<_>, Vec<_>) = batch
                .into_iter()
                .map(|waiter| (waiter.input, waiter.answer))
                .unzip();
            let statement = run(inputs);
            if last == ticket && answers.len() == 1 {
                // Only this leader's own call: if its caller goes away, no
                // one else loses an answer.
                send(answers, statement.await);
            } else {
                // A task of its own: if this leader's caller goes away, the
                // batch still runs and answers the others. Waiting for it only
                // keeps this leader's permit; it cannot fail but by a panic,
                // and then the others read their answers as gone.
                let _finished = tokio::spawn(async move { send(answers, statement.await) }).await;
            }
            if last >= ticket {
                return;
            }
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue<T, R>> {
        // A panic while the lock is held cannot leave the queue half-changed:
        // pushes and drains are single calls.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sends each waiter its answer, in order.
fn send<R>(answers: Vec<oneshot::Sender<R>>, results: Vec<R>) {
    for (answer, result) in answers.into_iter().zip(results) {
        // The caller may have gone away; its answer is dropped.
        let _gone = answer.send(result);
    }
}
