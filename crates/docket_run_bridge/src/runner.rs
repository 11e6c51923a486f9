//! What executes one run: the [`ScriptRunner`] trait, and [`SandboxRunner`],
//! which evaluates the version's source in `docket_script` with a host per run.

use std::sync::Arc;

use async_trait::async_trait;
use docket_catalog::scripts::{Run, ScriptVersion};
use docket_script::{Host, HostError, Isolation, Limits, RunProgress, ScriptInput, ScriptReport};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::owners::OwnerAccess;

/// What executes one run: the sandbox with a host (see [`SandboxRunner`]), or
/// a stand-in in tests.
#[async_trait]
pub trait ScriptRunner: Send + Sync + 'static {
    /// What is known of the script owner `owner` now; the worker asks when a
    /// run starts, and fails a refused one. The default checks nothing: a
    /// runner without an identity configuration behind it knows no owners.
    async fn owner_access(&self, owner: &str) -> OwnerAccess {
        let _ = owner;
        OwnerAccess::Unchecked
    }

    /// Runs `version` for `run` acting with `roles` (see
    /// [`acting_roles`](crate::acting_roles)), stopping when `cancel` fires;
    /// `progress` counts tool calls as they happen.
    async fn run(
        &self,
        run: &Run,
        version: &ScriptVersion,
        roles: &[String],
        cancel: CancellationToken,
        progress: Arc<RunProgress>,
    ) -> ScriptReport;
}

/// Makes the [`Host`] a run talks to, acting with the roles given.
type HostFactory = dyn Fn(&Run, &ScriptVersion, &[String]) -> Arc<dyn Host> + Send + Sync;

/// Tells what is known of a script owner now (see [`ScriptRunner::owner_access`]).
type OwnerLookup = dyn Fn(&str) -> OwnerAccess + Send + Sync;

/// The real runner: the version's source in `docket_script` under `limits`,
/// evaluated where `isolation` says (a child process, in a server), with the
/// host `host_for` makes for each run.
pub struct SandboxRunner {
    limits: Limits,
    isolation: Isolation,
    host_for: Box<HostFactory>,
    owners: Option<Box<OwnerLookup>>,
}

impl SandboxRunner {
    /// A runner with these limits, isolation and host factory, that checks no
    /// owner (see [`SandboxRunner::checking_owners`]).
    pub fn new(
        limits: Limits,
        isolation: Isolation,
        host_for: impl Fn(&Run, &ScriptVersion, &[String]) -> Arc<dyn Host> + Send + Sync + 'static,
    ) -> Self {
        Self {
            limits,
            isolation,
            host_for: Box::new(host_for),
            owners: None,
        }
    }

    /// This runner, asking `owners` about each run's owner when the run starts.
    #[must_use]
    pub fn checking_owners(
        mut self,
        owners: impl Fn(&str) -> OwnerAccess + Send + Sync + 'static,
    ) -> Self {
        self.owners = Some(Box::new(owners));
        self
    }
}

#[async_trait]
impl ScriptRunner for SandboxRunner {
    async fn owner_access(&self, owner: &str) -> OwnerAccess {
        self.owners
            .as_ref()
            .map_or(OwnerAccess::Unchecked, |owners| owners(owner))
    }

    async fn run(
        &self,
        run: &Run,
        version: &ScriptVersion,
        roles: &[String],
        cancel: CancellationToken,
        progress: Arc<RunProgress>,
    ) -> ScriptReport {
        let input = ScriptInput {
            run_id: run.id.clone(),
            params: run.params.as_object().cloned().unwrap_or_default(),
            fire_time: run.fire_time.and_then(|at| {
                at.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            }),
        };
        // The evaluation (a child process, unless isolation is in-process), with each
        // `platform.call` the host serves as its child.
        let span = tracing::info_span!(
            "script_child",
            otel.name = "script evaluate",
            otel.kind = "internal",
            "docket.script.isolation" = match self.isolation {
                Isolation::InProcess => "in_process",
                Isolation::Child(_) => "child",
            },
        );
        // In process, host calls run on tasks of their own: they are kept in the span.
        let host: Arc<dyn Host> = Arc::new(InSpan {
            host: (self.host_for)(run, version, roles),
            span: span.clone(),
        });
        self.isolation
            .run(
                version.source.clone(),
                input,
                host,
                self.limits,
                cancel,
                progress,
            )
            .instrument(span)
            .await
    }
}

/// A host whose every call runs in `span`, wherever the evaluator has it run.
struct InSpan {
    host: Arc<dyn Host>,
    span: tracing::Span,
}

#[async_trait]
impl Host for InSpan {
    async fn call(&self, tool: String, args: Value) -> Result<Value, HostError> {
        self.host
            .call(tool, args)
            .instrument(self.span.clone())
            .await
    }

    async fn query(
        &self,
        sql: String,
        connection: Option<String>,
        params: Map<String, Value>,
    ) -> Result<Value, HostError> {
        self.host
            .query(sql, connection, params)
            .instrument(self.span.clone())
            .await
    }

    async fn export(&self, name: String, rows: Value, format: String) -> Result<Value, HostError> {
        self.host
            .export(name, rows, format)
            .instrument(self.span.clone())
            .await
    }
}
