//! What executes one run: the [`ScriptRunner`] trait, and [`SandboxRunner`],
//! which evaluates the version's source in `docket_script` with a host per run.

use std::sync::Arc;

use async_trait::async_trait;
use docket_catalog::scripts::{Run, ScriptVersion};
use docket_script::{Host, Isolation, Limits, RunProgress, ScriptInput, ScriptReport};
use tokio_util::sync::CancellationToken;

/// What executes one run: the sandbox with a host (see [`SandboxRunner`]), or
/// a stand-in in tests.
#[async_trait]
pub trait ScriptRunner: Send + Sync + 'static {
    /// Runs `version` for `run`, stopping when `cancel` fires; `progress`
    /// counts tool calls as they happen.
    async fn run(
        &self,
        run: &Run,
        version: &ScriptVersion,
        cancel: CancellationToken,
        progress: Arc<RunProgress>,
    ) -> ScriptReport;
}

/// Makes the [`Host`] a run talks to.
type HostFactory = dyn Fn(&Run, &ScriptVersion) -> Arc<dyn Host> + Send + Sync;

/// The real runner: the version's source in `docket_script` under `limits`,
/// evaluated where `isolation` says (a child process, in a server), with the
/// host `host_for` makes for each run.
pub struct SandboxRunner {
    limits: Limits,
    isolation: Isolation,
    host_for: Box<HostFactory>,
}

impl SandboxRunner {
    /// A runner with these limits, isolation and host factory.
    pub fn new(
        limits: Limits,
        isolation: Isolation,
        host_for: impl Fn(&Run, &ScriptVersion) -> Arc<dyn Host> + Send + Sync + 'static,
    ) -> Self {
        Self {
            limits,
            isolation,
            host_for: Box::new(host_for),
        }
    }
}

#[async_trait]
impl ScriptRunner for SandboxRunner {
    async fn run(
        &self,
        run: &Run,
        version: &ScriptVersion,
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
        let host = (self.host_for)(run, version);
        self.isolation
            .run(
                version.source.clone(),
                input,
                host,
                self.limits,
                cancel,
                progress,
            )
            .await
    }
}
