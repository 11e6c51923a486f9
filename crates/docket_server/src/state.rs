//! The application as every connection shares it: configuration, tools, identity,
//! personas, metrics and the task surface, built once by [`crate::AppBuilder`];
//! and [`Principals`], how signed-in callers' claims reach the principal
//! directory their script runs read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use docket_catalog::PrincipalStore;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use docket_run_bridge::RunBridge;
use docket_task::audit::AuditWriter;
use docket_task::runtime::TaskRuntime;

use crate::assets::Assets;
use crate::auth::{Authenticator, Identity, IdentityKind};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::persona::Personas;
use crate::rate_limit::RateLimiter;
use crate::registry::ToolRegistry;
use crate::request_state::RequestStateKey;
use crate::tasks::Tasks;

/// The server's name in `serverInfo`.
pub const SERVER_NAME: &str = "docket";

/// Everything a request needs, shared by all connections. Cheap to clone.
#[derive(Clone)]
pub struct App {
    pub(crate) state: Arc<AppState>,
}

pub(crate) struct AppState {
    pub(crate) config: Config,
    /// The sessions of the earlier protocol era.
    pub(crate) sessions: Arc<dyn docket_catalog::SessionStore>,
    /// What signed-in callers' tokens said about them, for their script runs.
    pub(crate) principals: Principals,
    /// Resources, prompts and completions.
    pub(crate) features: crate::features::Features,
    /// Changes to the prompt library and to assets, from every replica.
    pub(crate) changes: tokio::sync::broadcast::Sender<docket_catalog::CatalogChange>,
    /// The calls on this replica waiting for their session's answers.
    pub(crate) answer_waiters: Arc<crate::answers::AnswerWaiters>,
    /// The server's `Implementation`: every result carries it.
    pub(crate) server_info: docket_protocol::meta::Implementation,
    /// The same, encoded once, for results stamped as a `Value`.
    pub(crate) server_info_json: serde_json::Value,
    pub(crate) registry: ToolRegistry,
    pub(crate) authenticator: Authenticator,
    pub(crate) personas: Personas,
    pub(crate) rate_limiter: Arc<RateLimiter>,
    /// What each identity holds of the server's connections now.
    pub(crate) holds: crate::holds::Holds,
    pub(crate) state_key: RequestStateKey,
    pub(crate) metrics: Metrics,
    pub(crate) draining: AtomicBool,
    /// Fires when the app starts draining: open listen streams end with their
    /// closing response.
    pub(crate) closing: tokio_util::sync::CancellationToken,
    /// Whether the background work has been started (it is started once).
    pub(crate) background_started: AtomicBool,
    pub(crate) sse_keepalive: Duration,
    /// The task machinery, when a store is configured and `tasks.enabled`.
    pub(crate) tasks: Option<Tasks>,
    /// Where audit rows go, when a store is configured and `audit.enabled`.
    pub(crate) audit: Option<Arc<AuditWriter>>,
    /// This replica's id.
    pub(crate) replica_id: String,
    /// Asset rows and bytes, for downloads.
    pub(crate) assets: Option<Assets>,
    /// Deletes audit rows, call records and assets past their retention.
    pub(crate) retention: Option<Arc<dyn docket_catalog::retention::Retention>>,
    /// The spools of cut answers, when configured.
    pub(crate) continuation: Option<Arc<crate::continuation::Continuation>>,
    /// The run queue's workers, when a database is configured and `scripts.enabled`.
    pub(crate) run_bridge: Option<Arc<RunBridge>>,
    /// The portal at `/portal`, when `portal.enabled`.
    pub(crate) portal: Option<crate::portal::ComposedPortal>,
}

impl App {
    /// The configuration the app runs with.
    pub fn config(&self) -> &Config {
        &self.state.config
    }

    /// The metrics, for embedders that export them elsewhere.
    pub fn metrics(&self) -> &Metrics {
        &self.state.metrics
    }

    /// Marks the app as draining: `/readyz` answers 503 from now on, and new
    /// task-creating calls are refused.
    pub fn start_draining(&self) {
        self.state.draining.store(true, Ordering::SeqCst);
        self.state.closing.cancel();
    }

    /// Whether the app is draining.
    pub fn is_draining(&self) -> bool {
        self.state.draining.load(Ordering::SeqCst)
    }

    /// Whether calls may become tasks (a store is configured and `tasks.enabled`).
    pub fn tasks_enabled(&self) -> bool {
        self.state.tasks.is_some()
    }

    /// This replica's id, stamped on the tasks it runs.
    pub fn replica_id(&self) -> &str {
        &self.state.replica_id
    }

    /// The run bridge (script runs), when scripts are enabled.
    pub fn run_bridge(&self) -> Option<&Arc<RunBridge>> {
        self.state.run_bridge.as_ref()
    }

    /// The task runtime, when tasks are enabled.
    pub fn task_runtime(&self) -> Option<&Arc<TaskRuntime>> {
        self.state.tasks.as_ref().map(|tasks| &tasks.runtime)
    }
}

/// Claims that describe a token rather than the person it was issued to: they
/// change with every token, mean nothing once it expired, and are not remembered
/// (nor do they count as a change of claims).
const TOKEN_CLAIMS: &[&str] = &[
    "exp",
    "iat",
    "nbf",
    "jti",
    "auth_time",
    "nonce",
    "at_hash",
    "c_hash",
];

/// How long unchanged claims go unwritten: a person seen all day costs a write
/// an hour per replica, and their row's sighting stays well within retention.
pub(crate) const REWRITE_AFTER: Duration = Duration::from_secs(3600);

/// How soon a failed write is tried again, by a later request.
const RETRY_AFTER: Duration = Duration::from_secs(60);

/// The most subjects whose last write this replica keeps in mind; beyond it,
/// those due soonest (written longest ago) are forgotten first, and only cost
/// one more write when they come back.
pub(crate) const MAX_TRACKED_SUBJECTS: usize = 10_000;

/// What this replica last wrote for a subject.
#[derive(Clone, Copy, Debug)]
struct Written {
    /// SHA-256 of the claims as written (JSON).
    digest: [u8; 32],
    /// When the same claims are written again (to refresh the sighting).
    due: Instant,
}

type WrittenMap = Arc<Mutex<HashMap<String, Written>>>;

/// The principal directory as requests feed it: when a request authenticates
/// with an OIDC token, its verified claims (less [`TOKEN_CLAIMS`]) are
/// remembered, so that the person's script runs, scheduled ones too, act
/// upstream as them by any claim. Not on every request: only when the claims
/// changed or the last write is older than [`REWRITE_AFTER`]. The write runs in
/// the background and never fails or slows the request; a failure is logged
/// without the claims.
pub(crate) struct Principals {
    pub(crate) store: Arc<dyn PrincipalStore>,
    written: WrittenMap,
}

fn lock(
    written: &Mutex<HashMap<String, Written>>,
) -> std::sync::MutexGuard<'_, HashMap<String, Written>> {
    written.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Principals {
    /// Feeds `store`, remembering nothing written yet.
    pub(crate) fn new(store: Arc<dyn PrincipalStore>) -> Self {
        Self {
            store,
            written: Arc::default(),
        }
    }

    /// Notes that `identity` authenticated a request; for an OIDC identity whose
    /// claims are due, starts their write.
    pub(crate) fn seen(&self, identity: &Identity) {
        if identity.kind != IdentityKind::Oidc {
            return;
        }
        let claims: Map<String, Value> = identity
            .attributes
            .claims
            .iter()
            .filter(|(name, _)| !TOKEN_CLAIMS.contains(&name.as_str()))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let Ok(encoded) = serde_json::to_vec(&claims) else {
            return;
        };
        let digest: [u8; 32] = Sha256::digest(&encoded).into();
        let now = Instant::now();
        let subject = identity.subject.clone();
        {
            let mut written = lock(&self.written);
            if written
                .get(&subject)
                .is_some_and(|last| last.digest == digest && now < last.due)
            {
                return;
            }
            if !written.contains_key(&subject) && written.len() >= MAX_TRACKED_SUBJECTS {
                forget_soonest_due(&mut written);
            }
            written.insert(
                subject.clone(),
                Written {
                    digest,
                    due: now + REWRITE_AFTER,
                },
            );
        }
        // Refused claims stay refused until they change: noted above, so this
        // is logged once an hour, not once a request.
        if let Err(refused) = docket_catalog::principals::validate(&subject, &claims) {
            tracing::warn!(
                subject = subject.chars().take(64).collect::<String>(),
                %refused,
                "a signed-in caller's claims are not remembered; their script runs act as if \
                 they had never signed in"
            );
            return;
        }
        let store = Arc::clone(&self.store);
        let written = Arc::clone(&self.written);
        tokio::spawn(async move {
            let remembered = store
                .remember(&subject, &claims, time::OffsetDateTime::now_utc())
                .await;
            if let Err(error) = remembered {
                tracing::warn!(
                    %error,
                    subject,
                    "could not remember a signed-in caller's claims; a later request tries again"
                );
                if let Some(last) = lock(&written)
                    .get_mut(&subject)
                    .filter(|last| last.digest == digest)
                {
                    last.due = Instant::now() + RETRY_AFTER;
                }
            }
        });
    }
}

/// Makes room in a full map: forgets the tenth of it due soonest.
fn forget_soonest_due(written: &mut HashMap<String, Written>) {
    let mut by_due: Vec<(Instant, String)> = written
        .iter()
        .map(|(subject, last)| (last.due, subject.clone()))
        .collect();
    by_due.sort_unstable();
    for (_, subject) in by_due.into_iter().take((MAX_TRACKED_SUBJECTS / 10).max(1)) {
        written.remove(&subject);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use async_trait::async_trait;
    use docket_catalog::CatalogError;
    use docket_catalog::memory::MemoryPrincipals;
    use serde_json::json;
    use time::OffsetDateTime;

    use super::*;
    use crate::auth::Attributes;

    /// A directory that counts its writes and fails them on demand.
    #[derive(Default)]
    struct Counting {
        inner: MemoryPrincipals,
        writes: AtomicUsize,
        failing: AtomicBool,
    }

    #[async_trait]
    impl PrincipalStore for Counting {
        async fn remember(
            &self,
            subject: &str,
            claims: &Map<String, Value>,
            now: OffsetDateTime,
        ) -> Result<(), CatalogError> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            if self.failing.load(Ordering::SeqCst) {
                return Err(CatalogError::Unavailable("down".into()));
            }
            self.inner.remember(subject, claims, now).await
        }

        async fn claims_of(
            &self,
            subject: &str,
        ) -> Result<Option<Map<String, Value>>, CatalogError> {
            self.inner.claims_of(subject).await
        }

        async fn forget_unseen_before(
            &self,
            cutoff: OffsetDateTime,
            limit: u32,
        ) -> Result<u64, CatalogError> {
            self.inner.forget_unseen_before(cutoff, limit).await
        }
    }

    fn signed_in(sub: &str, claims: Value) -> Identity {
        let Value::Object(claims) = claims else {
            panic!("claims are an object");
        };
        Identity {
            subject: format!("oidc:{sub}"),
            display_name: sub.to_owned(),
            email: None,
            roles: Vec::new(),
            kind: IdentityKind::Oidc,
            run: None,
            attributes: Attributes {
                claims: Arc::new(claims),
                key_user: None,
                token: None,
            },
        }
    }

    /// Lets the spawned writes run (they never wait on anything here).
    async fn settle() {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn claims_are_written_when_they_change_or_an_hour_passed() {
        let store = Arc::new(Counting::default());
        let principals = Principals::new(Arc::clone(&store) as Arc<dyn PrincipalStore>);
        let writes = || store.writes.load(Ordering::SeqCst);
        let alice = |email: &str, exp: u64| {
            signed_in(
                "alice",
                json!({"sub": "alice", "email": email, "exp": exp, "iat": exp - 300}),
            )
        };

        principals.seen(&alice("alice@example.com", 1000));
        settle().await;
        assert_eq!(writes(), 1);
        assert_eq!(
            store.claims_of("oidc:alice").await.expect("read"),
            Some(
                json!({"sub": "alice", "email": "alice@example.com"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default()
            ),
            "the token's own claims are not remembered"
        );
        // The same person with the next token: nothing to write.
        principals.seen(&alice("alice@example.com", 2000));
        settle().await;
        assert_eq!(writes(), 1);
        // Changed claims are written at once.
        principals.seen(&alice("alice@new.example", 2000));
        settle().await;
        assert_eq!(writes(), 2);
        // An hour on, unchanged claims are written again (their sighting moves).
        tokio::time::advance(REWRITE_AFTER).await;
        principals.seen(&alice("alice@new.example", 3000));
        settle().await;
        assert_eq!(writes(), 3);

        // API keys and anonymous callers are not OIDC principals.
        let mut key = alice("alice@example.com", 1000);
        key.kind = IdentityKind::ApiKey;
        key.subject = "apikey:alice".into();
        principals.seen(&key);
        settle().await;
        assert_eq!(writes(), 3);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn failed_and_refused_writes_never_fail_the_request_and_retry_later() {
        let store = Arc::new(Counting::default());
        let principals = Principals::new(Arc::clone(&store) as Arc<dyn PrincipalStore>);
        let writes = || store.writes.load(Ordering::SeqCst);
        let bob = signed_in("bob", json!({"sub": "bob", "email": "bob@example.com"}));

        store.failing.store(true, Ordering::SeqCst);
        principals.seen(&bob);
        settle().await;
        principals.seen(&bob);
        settle().await;
        assert_eq!(
            writes(),
            1,
            "a failed write is not retried by every request"
        );
        store.failing.store(false, Ordering::SeqCst);
        tokio::time::advance(RETRY_AFTER).await;
        principals.seen(&bob);
        settle().await;
        assert_eq!(writes(), 2);
        assert!(store.claims_of("oidc:bob").await.expect("read").is_some());

        // Claims over the directory's bound are not sent to it at all.
        let huge = signed_in(
            "huge",
            json!({"sub": "huge", "blob": "x".repeat(docket_catalog::principals::MAX_CLAIMS_BYTES)}),
        );
        principals.seen(&huge);
        settle().await;
        assert_eq!(writes(), 2);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_subjects_kept_in_mind_are_bounded() {
        let store = Arc::new(Counting::default());
        let principals = Principals::new(Arc::clone(&store) as Arc<dyn PrincipalStore>);
        for index in 0..=MAX_TRACKED_SUBJECTS {
            let sub = format!("user-{index}");
            principals.seen(&signed_in(&sub, json!({"sub": sub})));
            // Distinct due times, so "soonest due" has one answer.
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        settle().await;
        let tracked = lock(&principals.written).len();
        assert!(tracked <= MAX_TRACKED_SUBJECTS, "{tracked}");
        assert!(!lock(&principals.written).contains_key("oidc:user-0"));
        assert!(
            lock(&principals.written).contains_key(&format!("oidc:user-{MAX_TRACKED_SUBJECTS}"))
        );
    }
}
