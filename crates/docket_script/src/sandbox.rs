//! One run: the evaluator thread, its limits, and how its end becomes a [`ScriptReport`].

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use starlark::environment::Module;
use starlark::eval::Evaluator;
use tokio_util::sync::CancellationToken;

use crate::globals::{self, RunContext, Stop};
use crate::log::BoundedLog;
use crate::parse;
use crate::{Host, LimitKind, Limits, RunProgress, ScriptFailure, ScriptInput, ScriptReport};

/// The evaluator thread's stack. The parser and the evaluator recurse on the native stack, so
/// it is far larger than a default thread's; only the pages a script touches are committed.
pub(crate) const STACK_BYTES: usize = 256 * 1024 * 1024;

/// How deep Starlark calls may nest. Recursion is allowed (unlike the original, which refuses
/// it), but bounded here and by the step limit.
const MAX_CALL_DEPTH: usize = 200;

/// [`run`](crate::run), with live counters the caller can read while the script runs and after
/// it ended.
///
/// The script runs on a new OS thread; this future waits for its report without blocking the
/// runtime.
pub async fn run_with_progress(
    source: String,
    input: ScriptInput,
    host: Arc<dyn Host>,
    limits: Limits,
    cancel: CancellationToken,
    progress: Arc<RunProgress>,
) -> ScriptReport {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return platform_failure("docket_script::run was called outside a tokio runtime");
    };
    // A child token, cancelled when this future is dropped, so an abandoned run stops too.
    let cancel = cancel.child_token();
    let _stop_when_dropped = cancel.clone().drop_guard();
    let deadline = Instant::now().checked_add(limits.wall_time);
    let (report_sender, report) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("docket-script".to_owned())
        .stack_size(STACK_BYTES)
        .spawn(move || {
            let context = Rc::new(RunContext {
                host,
                runtime,
                cancel,
                deadline,
                progress,
                host_calls: Cell::new(0),
                queries: Cell::new(0),
                outputs: RefCell::new(Vec::new()),
                stop: Cell::new(None),
            });
            let _installed = globals::install(Rc::clone(&context));
            let report = catch_unwind(AssertUnwindSafe(|| {
                evaluate(&source, &input, &context, &limits)
            }))
            .unwrap_or_else(|panic| crashed(&panic_message(panic.as_ref())));
            // The caller only stops listening when it was dropped, and then nobody wants it.
            let _ = report_sender.send(report);
        });
    if let Err(cause) = spawned {
        return platform_failure(&format!("could not start the script thread: {cause}"));
    }
    report
        .await
        .unwrap_or_else(|_| platform_failure("the script thread ended without a report"))
}

/// A report for a run the sandbox itself could not carry out.
fn platform_failure(message: &str) -> ScriptReport {
    ScriptReport {
        outcome: Err(ScriptFailure::Platform(message.to_owned())),
        log: String::new(),
        log_truncated: false,
        steps: 0,
        host_calls: 0,
    }
}

/// A report for a run whose interpreter panicked.
fn crashed(message: &str) -> ScriptReport {
    ScriptReport {
        outcome: Err(ScriptFailure::Crashed {
            message: message.to_owned(),
        }),
        ..platform_failure("")
    }
}

/// The text of a panic inside the sandbox.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    format!("the script's interpreter crashed: {detail}")
}

/// Parses and evaluates the script on this thread.
fn evaluate(
    source: &str,
    input: &ScriptInput,
    context: &RunContext,
    limits: &Limits,
) -> ScriptReport {
    let log = BoundedLog::new(limits.max_log_bytes);
    let (outcome, steps) = match parse::parse(source, limits) {
        Err(syntax) if source.len() > limits.max_source_bytes => (
            Err(ScriptFailure::Limit {
                limit: LimitKind::Source,
                message: syntax.message,
            }),
            0,
        ),
        Err(syntax) => (Err(ScriptFailure::Syntax(syntax)), 0),
        Ok(_) if context.must_stop() => {
            let reason = context.stop.take().unwrap_or(Stop::Cancelled);
            (
                Err(stopped(
                    reason,
                    limits,
                    "the run was stopped before it started",
                )),
                0,
            )
        }
        Ok(ast) => {
            let globals = globals::build(input);
            Module::with_temp_heap(|module| {
                let mut eval = Evaluator::new(&module);
                eval.set_print_handler(&log);
                eval.set_check_cancelled(Box::new(|| context.must_stop()));
                let configured = eval
                    .set_max_tick_count(limits.max_steps.max(1))
                    .and_then(|()| eval.set_max_heap_size(limits.max_heap_bytes.max(1)))
                    .and_then(|()| eval.set_max_callstack_size(MAX_CALL_DEPTH));
                if let Err(cause) = configured {
                    let failure = ScriptFailure::Platform(format!(
                        "the script sandbox could not set its limits: {cause}"
                    ));
                    return (Err(failure), 0);
                }
                let result = eval.eval_module(ast, &globals);
                let steps = eval.get_total_tick_count();
                let outcome = match result {
                    Ok(_) => Ok(success(context)),
                    Err(error) => Err(classify(&error, context, limits, steps)),
                };
                (outcome, steps)
            })
        }
    };
    context
        .progress
        .steps
        .fetch_max(steps, std::sync::atomic::Ordering::Relaxed);
    let (log, log_truncated) = log.finish();
    ScriptReport {
        outcome,
        log,
        log_truncated,
        steps,
        host_calls: context.host_calls.get(),
    }
}

/// The value of a run that succeeded: the part of the original's run result that the script
/// determines.
fn success(context: &RunContext) -> serde_json::Value {
    serde_json::json!({
        "queries": context.queries.get(),
        "outputs": context.outputs.borrow().clone(),
    })
}

/// Why an evaluation failed.
fn classify(
    error: &starlark::Error,
    context: &RunContext,
    limits: &Limits,
    steps: u64,
) -> ScriptFailure {
    let detail = error.to_string();
    // Whatever stopped the run from outside recorded why before it stopped the evaluator, so
    // the evaluator's own error is then only the means.
    if let Some(reason) = context.stop.take() {
        return stopped(reason, limits, &detail);
    }
    if steps > limits.max_steps {
        return ScriptFailure::Limit {
            limit: LimitKind::Steps,
            message: format!(
                "halted: script exceeded its execution-step limit of {} steps; simplify the \
                 script or move the work into SQL: {detail}",
                limits.max_steps
            ),
        };
    }
    if detail.contains("Heap memory limit of") {
        return ScriptFailure::Limit {
            limit: LimitKind::Heap,
            message: format!(
                "halted: script exceeded its memory limit of {} bytes; keep fewer rows in memory \
                 or move the work into SQL: {detail}",
                limits.max_heap_bytes
            ),
        };
    }
    ScriptFailure::Error { message: detail }
}

/// The failure of a run stopped from outside the script (cancel, deadline, platform fault).
fn stopped(reason: Stop, limits: &Limits, detail: &str) -> ScriptFailure {
    match reason {
        Stop::Platform(message) => ScriptFailure::Platform(message),
        Stop::WallTime => ScriptFailure::Limit {
            limit: LimitKind::WallTime,
            message: format!(
                "halted: script exceeded its time limit of {} s: {detail}",
                limits.wall_time.as_secs_f64()
            ),
        },
        Stop::Cancelled => ScriptFailure::Cancelled,
    }
}
