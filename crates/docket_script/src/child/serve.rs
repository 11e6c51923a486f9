//! The child's side: read the run from the parent, evaluate it in the sandbox, send every host
//! call up the pipe and wait for its reply, send the report, exit.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::frame::{self, Answer, FrameError, FromChild, HostRequest, ToChild, WireReport};
use crate::{Host, HostError, Limits, ScriptFailure, ScriptInput, ScriptReport};

/// The exit code of a child whose parent went away (its pipe closed) before the run ended.
const PARENT_GONE: u8 = 3;

/// The exit code of a child that could not talk to its parent at all.
const PROTOCOL: u8 = 4;

/// The child process's whole life: call it from `main` of the program the parent starts (the
/// `docket` binary's hidden `script-child` subcommand) and return its exit code. It reads one
/// run from standard input, evaluates it, answers on standard output and never returns to the
/// caller's other work: when the parent goes away it exits at once.
#[must_use]
pub fn serve() -> ExitCode {
    close_inherited_descriptors();
    // The interpreter's one-time set-up (the standard library's functions and their parsed
    // documentation) before the run is read: a child started ahead of its run
    // (`ChildProcess::warm`) has done it by the time the run comes.
    drop(crate::globals::build(&ScriptInput::default()));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("docket script child: cannot start a runtime: {error}");
            return ExitCode::from(PROTOCOL);
        }
    };
    let code = runtime.block_on(serve_pipes());
    // The reader of standard input may still be blocked in a read on a thread of the runtime's
    // blocking pool; a process that has said everything it will say does not wait for it.
    std::process::exit(i32::from(code))
}

/// Serves one run over standard input and output; the exit code.
async fn serve_pipes() -> u8 {
    let mut input = tokio::io::stdin();
    let output = Arc::new(tokio::sync::Mutex::new(tokio::io::stdout()));
    let (source, run, limits) = match frame::read::<ToChild>(&mut input).await {
        Ok(Some(ToChild::Start {
            source,
            run_id,
            params,
            fire_time,
            limits,
        })) => (
            source,
            ScriptInput {
                run_id,
                params,
                fire_time,
            },
            Limits::from(&limits),
        ),
        Ok(None) => return PARENT_GONE,
        Ok(Some(other)) => {
            eprintln!("docket script child: expected the run first, got {other:?}");
            return PROTOCOL;
        }
        Err(error) => {
            eprintln!("docket script child: cannot read the run: {error}");
            return PROTOCOL;
        }
    };
    let cancel = CancellationToken::new();
    let waiting: Waiting = Arc::default();
    tokio::spawn(listen(input, cancel.clone(), Arc::clone(&waiting)));
    let host = Arc::new(PipeHost {
        output: Arc::clone(&output),
        waiting,
        next_call: Mutex::new(0),
    });
    let report = crate::run(source, run, host, limits, cancel).await;
    let frame = match frame::encode(&FromChild::Report {
        report: WireReport::from(report.clone()),
    }) {
        Ok(frame) => frame,
        Err(FrameError::TooLarge { bytes }) => {
            let outcome = Err(ScriptFailure::Error {
                message: format!(
                    "the run's result is {bytes} bytes, over the {} bytes a run may hand back; \
                     export large results with platform.export",
                    frame::MAX_FRAME_BYTES
                ),
            });
            let report = ScriptReport { outcome, ..report };
            match frame::encode(&FromChild::Report {
                report: WireReport::from(report),
            }) {
                Ok(frame) => frame,
                Err(error) => {
                    eprintln!("docket script child: cannot encode the report: {error}");
                    return PROTOCOL;
                }
            }
        }
        Err(error) => {
            eprintln!("docket script child: cannot encode the report: {error}");
            return PROTOCOL;
        }
    };
    let mut output = output.lock().await;
    match output.write_all(&frame).await {
        Ok(()) => {}
        Err(_) => return PARENT_GONE,
    }
    match output.flush().await {
        Ok(()) => 0,
        Err(_) => PARENT_GONE,
    }
}

/// The host call waiting for its reply, by number.
type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Answer>>>>;

/// Reads the parent's messages for the rest of the run: replies go to the call waiting for
/// them, a stop cancels the run, and the end of the pipe (the parent is gone) ends the process.
async fn listen(mut input: tokio::io::Stdin, cancel: CancellationToken, waiting: Waiting) {
    loop {
        match frame::read::<ToChild>(&mut input).await {
            Ok(Some(ToChild::Reply { call, answer })) => {
                let sender = waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&call);
                if let Some(sender) = sender {
                    // A call that stopped waiting (the run was stopped) needs no answer.
                    let _ = sender.send(answer);
                }
            }
            Ok(Some(ToChild::Stop)) => cancel.cancel(),
            Ok(Some(ToChild::Start { .. })) => {
                eprintln!("docket script child: a second run was sent; stopping");
                std::process::exit(i32::from(PROTOCOL));
            }
            // Nobody is left to answer a host call or read the report.
            Ok(None) => std::process::exit(i32::from(PARENT_GONE)),
            Err(error) => {
                eprintln!("docket script child: cannot read from the parent: {error}");
                std::process::exit(i32::from(PROTOCOL));
            }
        }
    }
}

/// The [`Host`] inside the child: each call is a message up the pipe.
struct PipeHost {
    output: Arc<tokio::sync::Mutex<tokio::io::Stdout>>,
    waiting: Waiting,
    next_call: Mutex<u64>,
}

impl PipeHost {
    async fn ask(&self, request: HostRequest) -> Result<Value, HostError> {
        let call = {
            let mut next = self
                .next_call
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *next += 1;
            *next
        };
        let frame =
            frame::encode(&FromChild::Call { call, request }).map_err(|error| match error {
                FrameError::TooLarge { bytes } => HostError::Tool(format!(
                    "the call's arguments are {bytes} bytes, over the {} bytes one call may carry",
                    frame::MAX_FRAME_BYTES
                )),
                other => HostError::Tool(format!("the call cannot be sent: {other}")),
            })?;
        let (sender, answer) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call, sender);
        let sent = {
            let mut output = self.output.lock().await;
            match output.write_all(&frame).await {
                Ok(()) => output.flush().await,
                Err(error) => Err(error),
            }
        };
        if let Err(error) = sent {
            return Err(HostError::Platform(format!(
                "the platform stopped listening to the script: {error}"
            )));
        }
        match answer.await {
            Ok(Answer::Value(value)) => Ok(value),
            Ok(Answer::Tool(message)) => Err(HostError::Tool(message)),
            Ok(Answer::Platform(message)) => Err(HostError::Platform(message)),
            Err(_) => Err(HostError::Platform(
                "the platform did not answer the call".to_owned(),
            )),
        }
    }
}

#[async_trait]
impl Host for PipeHost {
    async fn call(&self, tool: String, args: Value) -> Result<Value, HostError> {
        self.ask(HostRequest::Call { tool, args }).await
    }

    async fn query(
        &self,
        sql: String,
        connection: Option<String>,
        params: Map<String, Value>,
    ) -> Result<Value, HostError> {
        self.ask(HostRequest::Query {
            sql,
            connection,
            params,
        })
        .await
    }

    async fn export(&self, name: String, rows: Value, format: String) -> Result<Value, HostError> {
        self.ask(HostRequest::Export { name, rows, format }).await
    }
}

/// Closes every descriptor beyond standard input, output and error. The parent opens all of
/// its own close-on-exec, but whatever started the parent may have left it descriptors
/// without that flag, which every child would inherit; a child holds only its pipes.
fn close_inherited_descriptors() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let descriptors: Vec<i32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|descriptor| *descriptor > 2)
        .collect();
    for descriptor in descriptors {
        // The directory's own descriptor is among them, closed already: EBADF.
        let _ = nix::unistd::close(descriptor);
    }
}
