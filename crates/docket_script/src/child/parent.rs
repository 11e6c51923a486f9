//! The parent's side: start the child under its OS limits, hand it the run, answer its host
//! calls, stop it (a message, then a kill) when the run is cancelled or out of time, and say
//! what happened when it dies without a report.

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::pin::Pin;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use rustix::process::{Pid, Resource, Rlimit, Signal};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::frame::{self, Answer, FrameError, FromChild, HostRequest, ToChild, WireLimits};
use super::process::{ChildProcess, MEMORY_MARGIN_BYTES, STOP_GRACE};
use crate::{
    Host, HostError, LimitKind, Limits, RunProgress, ScriptFailure, ScriptInput, ScriptReport,
};

/// How much of the child's standard error is kept to explain a crash: the end of it.
const STDERR_TAIL_BYTES: usize = 4096;

/// CPU seconds a child may use beyond its wall time before the kernel stops it: the wall time
/// is the parent's limit, this one is the wall behind it.
const CPU_MARGIN_SECONDS: u64 = 2;

/// Descriptors a child may hold open: its pipes, its runtime's, and a few to spare.
const MAX_OPEN_FILES: u64 = 64;

type HostFuture = Pin<Box<dyn Future<Output = (Kind, Result<Value, HostError>)> + Send>>;

/// Which binding a host call came from, to count it as the in-process sandbox would.
#[derive(Clone, Copy)]
enum Kind {
    Call,
    Query,
    Export,
}

/// Why the parent stopped a child.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Cancelled,
    WallTime,
}

pub(super) async fn run(
    process: &ChildProcess,
    source: String,
    input: ScriptInput,
    host: Arc<dyn Host>,
    limits: Limits,
    cancel: CancellationToken,
    progress: Arc<RunProgress>,
) -> ScriptReport {
    let deadline = Instant::now().checked_add(limits.wall_time);
    let mut child = match start(process) {
        Ok(child) => child,
        Err(message) => return failure(ScriptFailure::Platform(message)),
    };
    if let Err(message) = hold_to_limits(&child, &limits) {
        kill(&mut child);
        return failure(ScriptFailure::Platform(message));
    }
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        kill(&mut child);
        return failure(ScriptFailure::Platform(
            "the script's process has no pipes".to_owned(),
        ));
    };
    let to_child = write_messages(stdin);
    let mut from_child = read_messages(stdout);
    let stderr_tail = tokio::spawn(keep_tail(stderr));
    let start = ToChild::Start {
        source,
        run_id: input.run_id,
        params: input.params,
        fire_time: input.fire_time,
        limits: WireLimits::from(&limits),
    };
    match frame::encode(&start) {
        Ok(frame) => {
            // A child that is gone already is explained below by how it ended.
            let _ = to_child.send(frame).await;
        }
        Err(error) => {
            kill(&mut child);
            return failure(ScriptFailure::Error {
                message: format!("the run cannot be handed to its process: {error}"),
            });
        }
    }

    let mut host_call: Option<(u64, HostFuture)> = None;
    let mut stopped: Option<(Stop, Instant)> = None;
    let mut report: Option<ScriptReport> = None;
    let mut protocol_error: Option<String> = None;
    let mut killed = false;
    loop {
        let kill_at = stopped.map(|(_, at)| at);
        tokio::select! {
            message = from_child.recv() => match message {
                Some(Ok(FromChild::Call { call, request })) => {
                    progress.host_calls.fetch_add(1, Ordering::Relaxed);
                    if stopped.is_none() {
                        host_call = Some((call, ask(Arc::clone(&host), request)));
                    }
                }
                Some(Ok(FromChild::Report { report: wire })) => {
                    report = Some(ScriptReport::from(wire));
                    break;
                }
                Some(Err(error)) => {
                    protocol_error = Some(error.to_string());
                    kill(&mut child);
                    killed = true;
                    break;
                }
                // The child closed its output: it has ended, or is about to.
                None => break,
            },
            (kind, answer) = async {
                match host_call.as_mut() {
                    Some((_, future)) => future.await,
                    None => std::future::pending().await,
                }
            } => {
                let call = host_call.take().map_or(0, |(call, _)| call);
                count(&progress, kind, &answer);
                let frame = reply(call, answer);
                let _ = to_child.send(frame).await;
            }
            () = cancel.cancelled(), if stopped.is_none() => {
                stopped = Some((Stop::Cancelled, Instant::now() + STOP_GRACE));
                host_call = None;
                if let Ok(frame) = frame::encode(&ToChild::Stop) {
                    let _ = to_child.try_send(frame);
                }
            }
            () = until(deadline), if stopped.is_none() => {
                stopped = Some((Stop::WallTime, Instant::now() + STOP_GRACE));
                host_call = None;
                if let Ok(frame) = frame::encode(&ToChild::Stop) {
                    let _ = to_child.try_send(frame);
                }
            }
            () = until(kill_at), if kill_at.is_some() => {
                kill(&mut child);
                killed = true;
                break;
            }
        }
    }
    drop(to_child);
    let status = ended(&mut child).await;
    let tail = stderr_tail.await.unwrap_or_default();
    if let Some(mut report) = report {
        // A child stopped for its deadline says it was cancelled: the parent knows better.
        if stopped.map(|(stop, _)| stop) == Some(Stop::WallTime)
            && matches!(report.outcome, Err(ScriptFailure::Cancelled))
        {
            report.outcome = Err(out_of_time(&limits));
        }
        return report;
    }
    let outcome = match (stopped.map(|(stop, _)| stop), protocol_error) {
        (Some(Stop::Cancelled), _) => ScriptFailure::Cancelled,
        (Some(Stop::WallTime), _) => out_of_time(&limits),
        (None, Some(error)) => ScriptFailure::Crashed {
            message: format!(
                "the script's interpreter broke the protocol with the platform: {error}"
            ),
        },
        (None, None) => crash(status, killed, &tail, &limits),
    };
    ScriptReport {
        outcome: Err(outcome),
        log: String::new(),
        log_truncated: false,
        steps: 0,
        host_calls: progress.host_calls(),
    }
}

/// A child for a run: one started ahead, if one waits and is still alive (another is then
/// started to take its place), else one started now.
fn start(process: &ChildProcess) -> Result<Child, String> {
    let Some(warm) = &process.warm else {
        return spawn(process);
    };
    let waiting = {
        let mut idle = warm.idle.lock().unwrap_or_else(PoisonError::into_inner);
        // One that died while it waited (killed from outside) is dropped and reaped.
        std::iter::from_fn(|| idle.pop())
            .find_map(|mut child| matches!(child.try_wait(), Ok(None)).then_some(child))
    };
    let child = match waiting {
        Some(child) => child,
        None => {
            warm.on_demand.fetch_add(1, Ordering::Relaxed);
            spawn(process)?
        }
    };
    refill(process);
    Ok(child)
}

/// Starts children, on a task of its own, until as many wait as `process` keeps. One that
/// cannot start is not retried here: the next run starts its own and says why it cannot.
fn refill(process: &ChildProcess) {
    let Some(warm) = process.warm.clone() else {
        return;
    };
    let process = process.clone();
    tokio::spawn(async move {
        let waiting = || warm.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while waiting().len() < warm.size {
            let Ok(child) = spawn(&process) else {
                return;
            };
            warm.ahead.fetch_add(1, Ordering::Relaxed);
            let mut idle = waiting();
            // Refills racing each other keep no more than asked; the extra is killed.
            if idle.len() < warm.size {
                idle.push(child);
            }
        }
    });
}

/// Starts the child: its own process group, an empty environment (it needs nothing from the
/// server's, which may hold secrets), and three pipes, so it inherits no other descriptor
/// (everything else the server opens is close-on-exec).
fn spawn(process: &ChildProcess) -> Result<Child, String> {
    let mut command = tokio::process::Command::new(&process.program);
    command
        .args(&process.args)
        .env_clear()
        // One malloc arena: each extra arena reserves 64 MiB of address space, which the
        // address-space limit would count against the script.
        .env("MALLOC_ARENA_MAX", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    command.spawn().map_err(|error| {
        format!(
            "could not start the script's process ({}): {error}",
            process.program.display()
        )
    })
}

/// The OS limits of a run's process, set by the parent before the run is sent, so no line of
/// the script runs without them: address space (the heap limit plus
/// [`MEMORY_MARGIN_BYTES`]), CPU time (the wall time plus a margin), no core files, no files
/// written, few descriptors.
fn hold_to_limits(child: &Child, limits: &Limits) -> Result<(), String> {
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
        .ok_or_else(|| "the script's process ended before it started".to_owned())?;
    let address_space = u64::try_from(limits.max_heap_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(MEMORY_MARGIN_BYTES);
    let cpu_seconds = limits
        .wall_time
        .as_secs()
        .saturating_add(CPU_MARGIN_SECONDS);
    let settings = [
        (Resource::As, address_space, address_space),
        (Resource::Cpu, cpu_seconds, cpu_seconds.saturating_add(1)),
        (Resource::Core, 0, 0),
        (Resource::Fsize, 0, 0),
        (Resource::Nofile, MAX_OPEN_FILES, MAX_OPEN_FILES),
    ];
    for (resource, current, maximum) in settings {
        let limit = Rlimit {
            current: Some(current),
            maximum: Some(maximum),
        };
        rustix::process::prlimit(Some(pid), resource, limit).map_err(|error| {
            format!("could not limit the script's process ({resource:?}): {error}")
        })?;
    }
    Ok(())
}

/// Kills the child's process group (the child and anything it could have started).
fn kill(child: &mut Child) {
    if let Some(pid) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
    {
        // It may have ended already; then there is nothing to kill.
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
    let _ = child.start_kill();
}

/// Waits for the child to end; one that lingers after closing its output is killed.
async fn ended(child: &mut Child) -> Option<ExitStatus> {
    match tokio::time::timeout(STOP_GRACE, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            kill(child);
            child.wait().await.ok()
        }
    }
}

/// Sends each frame queued to the child, in order, until the queue closes or the pipe breaks.
fn write_messages(mut stdin: ChildStdin) -> mpsc::Sender<Vec<u8>> {
    let (sender, mut frames) = mpsc::channel::<Vec<u8>>(4);
    tokio::spawn(async move {
        while let Some(frame) = frames.recv().await {
            if stdin.write_all(&frame).await.is_err() || stdin.flush().await.is_err() {
                return;
            }
        }
    });
    sender
}

/// The child's messages, one at a time; the channel closes when its output ends or breaks.
fn read_messages(
    mut stdout: impl AsyncRead + Unpin + Send + 'static,
) -> mpsc::Receiver<Result<FromChild, FrameError>> {
    let (sender, messages) = mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            match frame::read::<FromChild>(&mut stdout).await {
                Ok(Some(message)) => {
                    if sender.send(Ok(message)).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(error) => {
                    let _ = sender.send(Err(error)).await;
                    return;
                }
            }
        }
    });
    messages
}

/// The last [`STDERR_TAIL_BYTES`] the child wrote to standard error.
async fn keep_tail(mut stderr: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut tail = Vec::with_capacity(STDERR_TAIL_BYTES);
    let mut chunk = [0u8; 1024];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return tail,
            Ok(read) => {
                tail.extend_from_slice(&chunk[..read]);
                if tail.len() > STDERR_TAIL_BYTES {
                    tail.drain(..tail.len() - STDERR_TAIL_BYTES);
                }
            }
        }
    }
}

/// One host call, on the parent's runtime.
fn ask(host: Arc<dyn Host>, request: HostRequest) -> HostFuture {
    Box::pin(async move {
        match request {
            HostRequest::Call { tool, args } => (Kind::Call, host.call(tool, args).await),
            HostRequest::Query {
                sql,
                connection,
                params,
            } => (Kind::Query, host.query(sql, connection, params).await),
            HostRequest::Export { name, rows, format } => {
                (Kind::Export, host.export(name, rows, format).await)
            }
        }
    })
}

/// Counts an answered call as the in-process sandbox does: queries that answered, and the
/// outputs of exports that answered.
fn count(progress: &RunProgress, kind: Kind, answer: &Result<Value, HostError>) {
    match (kind, answer) {
        (Kind::Query, Ok(_)) => {
            progress.queries.fetch_add(1, Ordering::Relaxed);
        }
        (Kind::Export, Ok(output)) => progress.push_output(output.clone()),
        _ => {}
    }
}

/// The reply frame to call `call`; an answer too large to send becomes a tool error that says
/// so.
fn reply(call: u64, answer: Result<Value, HostError>) -> Vec<u8> {
    let answer = match answer {
        Ok(value) => Answer::Value(value),
        Err(HostError::Tool(message)) => Answer::Tool(message),
        Err(HostError::Platform(message)) => Answer::Platform(message),
    };
    frame::encode(&ToChild::Reply { call, answer }).unwrap_or_else(|error| {
        let message = match error {
            FrameError::TooLarge { bytes } => format!(
                "the result is {bytes} bytes, over the {} bytes a script may receive from one \
                 call; ask for less (a LIMIT, fewer columns) or export it",
                frame::MAX_FRAME_BYTES
            ),
            other => format!("the result cannot be handed to the script: {other}"),
        };
        frame::encode(&ToChild::Reply {
            call,
            answer: Answer::Tool(message),
        })
        .unwrap_or_default()
    })
}

/// Sleeps until `at`, or forever without one.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn out_of_time(limits: &Limits) -> ScriptFailure {
    ScriptFailure::Limit {
        limit: LimitKind::WallTime,
        message: format!(
            "halted: script exceeded its time limit of {} s",
            limits.wall_time.as_secs_f64()
        ),
    }
}

fn failure(outcome: ScriptFailure) -> ScriptReport {
    ScriptReport {
        outcome: Err(outcome),
        log: String::new(),
        log_truncated: false,
        steps: 0,
        host_calls: 0,
    }
}

/// What a child that died without a report went through, from how it ended and the end of
/// what it wrote to standard error.
fn crash(
    status: Option<ExitStatus>,
    killed: bool,
    stderr: &[u8],
    limits: &Limits,
) -> ScriptFailure {
    let stderr = String::from_utf8_lossy(stderr);
    let mebibytes = limits.max_heap_bytes / (1024 * 1024);
    if stderr.contains("memory allocation of") || stderr.contains("out of memory") {
        return ScriptFailure::Limit {
            limit: LimitKind::Heap,
            message: format!("the script ran out of memory (limit {mebibytes} MiB)"),
        };
    }
    if stderr.contains("has overflowed its stack") {
        return ScriptFailure::Crashed {
            message: "the script's interpreter crashed: stack overflow (data or calls nested \
                      too deeply)"
                .to_owned(),
        };
    }
    let signal = status.and_then(|status| status.signal());
    let detail = match signal {
        Some(signal) if signal == Signal::XCPU.as_raw() => {
            return ScriptFailure::Limit {
                limit: LimitKind::WallTime,
                message: format!(
                    "the script used up its CPU time limit of {} s",
                    limits
                        .wall_time
                        .as_secs()
                        .saturating_add(CPU_MARGIN_SECONDS)
                ),
            };
        }
        Some(signal) if signal == Signal::KILL.as_raw() && !killed => {
            // Nobody here killed it: the kernel did, for memory, or an operator.
            "killed (signal 9; the machine may be out of memory)".to_owned()
        }
        Some(signal) if signal == Signal::SEGV.as_raw() => "segmentation fault".to_owned(),
        Some(signal) if signal == Signal::ABORT.as_raw() => "aborted".to_owned(),
        Some(signal) => format!("killed by signal {signal}"),
        None => match status.and_then(|status| status.code()) {
            Some(code) => format!("exited with code {code}"),
            None => "ended without a report".to_owned(),
        },
    };
    let last_line = stderr
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .map(|line| line.chars().take(300).collect::<String>());
    ScriptFailure::Crashed {
        message: match last_line {
            Some(line) => format!("the script's interpreter crashed: {detail}: {line}"),
            None => format!("the script's interpreter crashed: {detail}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChildStarts;

    fn limits() -> Limits {
        Limits::draft()
    }

    /// Waits (for at most a minute: an event, not a timing) until `process` has started
    /// `ahead` children ahead of their runs.
    async fn started_ahead(process: &ChildProcess, ahead: u64) {
        for _ in 0..6000 {
            if process.starts().ahead >= ahead {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("no child was started ahead: {:?}", process.starts());
    }

    /// A warm process starts the first child when its run comes and another ahead for the
    /// next run, which then takes it instead of starting one; a waiting child that died is
    /// passed over for a new one.
    #[tokio::test]
    async fn runs_take_children_started_ahead_and_pass_over_dead_ones() {
        let process = ChildProcess::new("/bin/cat", Vec::<String>::new()).warm(1);
        let first = start(&process).expect("a child");
        assert_eq!(process.starts().on_demand, 1);
        started_ahead(&process, 1).await;
        let second = start(&process).expect("a child");
        assert_eq!(
            process.starts().on_demand,
            1,
            "the second came from the pool"
        );
        started_ahead(&process, 2).await;
        {
            let mut idle = process
                .warm
                .as_ref()
                .expect("warm")
                .idle
                .lock()
                .expect("lock");
            for child in idle.iter_mut() {
                kill(child);
            }
        }
        // Killed, it may not be reaped yet: the pool must not hand it out either way.
        let mut third = None;
        for _ in 0..6000 {
            let dead = process
                .warm
                .as_ref()
                .expect("warm")
                .idle
                .lock()
                .expect("lock")
                .iter_mut()
                .all(|child| !matches!(child.try_wait(), Ok(None)));
            if dead {
                third = Some(start(&process).expect("a child"));
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let mut third = third.expect("the waiting child died");
        assert_eq!(
            process.starts().on_demand,
            2,
            "a dead child is not handed out"
        );
        assert!(matches!(third.try_wait(), Ok(None)), "the third child runs");
        drop((first, second, third));
        let plain = ChildProcess::new("/bin/cat", Vec::<String>::new());
        drop(start(&plain).expect("a child"));
        assert_eq!(plain.starts(), ChildStarts::default());
    }

    #[test]
    fn an_allocation_failure_reads_as_running_out_of_memory() {
        let failure = crash(
            Some(ExitStatus::from_raw(6)),
            false,
            b"memory allocation of 2000000000000000 bytes failed\n",
            &limits(),
        );
        assert_eq!(
            failure.to_string(),
            "the script ran out of memory (limit 64 MiB)"
        );
    }

    #[test]
    fn a_stack_overflow_says_so() {
        let failure = crash(
            Some(ExitStatus::from_raw(6)),
            false,
            b"\nthread 'docket-script' has overflowed its stack\nfatal runtime error: stack overflow\n",
            &limits(),
        );
        assert!(failure.to_string().contains("stack overflow"), "{failure}");
    }

    #[test]
    fn the_cpu_limit_and_unknown_signals_are_named() {
        let xcpu = crash(
            Some(ExitStatus::from_raw(Signal::XCPU.as_raw())),
            false,
            b"",
            &limits(),
        );
        assert!(xcpu.to_string().contains("CPU time limit"), "{xcpu}");
        let segv = crash(
            Some(ExitStatus::from_raw(Signal::SEGV.as_raw())),
            false,
            b"",
            &limits(),
        );
        assert_eq!(
            segv.to_string(),
            "the script's interpreter crashed: segmentation fault"
        );
    }

    #[test]
    fn an_answer_too_large_to_send_becomes_a_tool_error_that_says_so() {
        let huge = Value::String("x".repeat(frame::MAX_FRAME_BYTES));
        let sent = reply(9, Ok(huge));
        assert!(sent.len() < 1024, "only the error crosses");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let read = runtime
            .block_on(frame::read::<ToChild>(&mut sent.as_slice()))
            .expect("reads")
            .expect("a message");
        let ToChild::Reply {
            call: 9,
            answer: Answer::Tool(message),
        } = read
        else {
            panic!("not the error reply: {read:?}");
        };
        assert!(
            message.contains("a script may receive from one call"),
            "{message}"
        );
    }
}
