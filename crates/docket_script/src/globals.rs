//! What a script sees: Starlark's standard functions plus `print` and `set`, and the original
//! platform's predeclared names `platform`, `json`, `date`, `run` and `sum`.
//!
//! `platform.*` are host calls: each one is handed to the caller's tokio runtime, and the
//! evaluator thread waits for its answer on a oneshot channel, racing the run's cancellation and
//! deadline so that neither waits on a slow host.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use starlark::environment::{Globals, GlobalsBuilder, LibraryExtension};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::dict::DictRef;
use starlark::values::list::ListRef;
use starlark::values::set::SetRef;
use starlark::values::structs::{AllocStruct, StructRef};
use starlark::values::tuple::TupleRef;
use starlark::values::{Heap, UnpackValue, Value};
use tokio_util::sync::CancellationToken;

use crate::convert::{self, JsonValue};
use crate::{Host, HostError, RunProgress, ScriptInput, date};

/// Everything the host bindings of one run share. It reaches them through a thread-local on the
/// run's own thread rather than `Evaluator::extra`, whose derive needs `unsafe`, which this
/// workspace forbids.
pub(crate) struct RunContext {
    pub(crate) host: Arc<dyn Host>,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) cancel: CancellationToken,
    /// When the wall-time limit runs out; `None` when it is too far away to represent.
    pub(crate) deadline: Option<Instant>,
    pub(crate) progress: Arc<RunProgress>,
    pub(crate) host_calls: Cell<u64>,
    pub(crate) queries: Cell<u64>,
    pub(crate) outputs: RefCell<Vec<serde_json::Value>>,
    /// Why the run was stopped from outside the script, when it was: the error the evaluator
    /// reports then is only the means of stopping it.
    pub(crate) stop: Cell<Option<Stop>>,
}

/// A reason to stop a run that is not the script's own error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stop {
    Cancelled,
    WallTime,
    Platform(String),
}

impl RunContext {
    /// Records why the run is being stopped, unless an earlier reason was already recorded.
    pub(crate) fn stop_with(&self, reason: Stop) {
        let current = self.stop.take();
        self.stop.set(Some(current.unwrap_or(reason)));
    }

    /// Whether the run must stop now (cancelled or out of time), recording why.
    pub(crate) fn must_stop(&self) -> bool {
        if self.cancel.is_cancelled() {
            self.stop_with(Stop::Cancelled);
            return true;
        }
        if self
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            self.stop_with(Stop::WallTime);
            return true;
        }
        false
    }
}

/// The error a host binding or helper raises in the script.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BindingError(String);

fn error(message: impl Into<String>) -> starlark::Error {
    starlark::Error::new_other(BindingError(message.into()))
}

thread_local! {
    /// The context of the run on this thread; each run has a thread of its own.
    static CURRENT_RUN: RefCell<Option<Rc<RunContext>>> = const { RefCell::new(None) };
}

/// Makes `context` the current run's on this thread until the guard is dropped.
pub(crate) fn install(context: Rc<RunContext>) -> Installed {
    CURRENT_RUN.with(|current| current.replace(Some(context)));
    Installed(())
}

/// Uninstalls the run's context when dropped.
pub(crate) struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        CURRENT_RUN.with(|current| current.replace(None));
    }
}

/// The run's context, which every run installs before evaluating.
fn context() -> starlark::Result<Rc<RunContext>> {
    CURRENT_RUN
        .with(|current| current.borrow().clone())
        .ok_or_else(|| error("the platform bindings are not available in this context"))
}

/// How deeply a value may nest to be written as JSON: as deep as `json.decode` reads (serde_json's
/// limit), and shallow enough that writing it cannot exhaust the evaluator's stack.
pub(crate) const MAX_JSON_DEPTH: usize = 128;

/// Refuses a value nested deeper than [`MAX_JSON_DEPTH`] before anything recursive walks it.
/// The walk itself keeps its own stack, and looks for a cancel or the deadline as it goes, so
/// a value whose parts are shared many times over cannot hold the run either.
pub(crate) fn check_depth<'v>(
    binding: &str,
    value: Value<'v>,
    heap: Heap<'v>,
) -> starlark::Result<()> {
    let mut pending = vec![(value, 1usize)];
    let mut visited = 0u64;
    while let Some((value, depth)) = pending.pop() {
        visited += 1;
        if visited.is_multiple_of(4096) && context().is_ok_and(|context| context.must_stop()) {
            return Err(error(format!("in {binding}: the run was stopped")));
        }
        let children: Vec<Value> = if let Some(list) = ListRef::from_value(value) {
            list.content().to_vec()
        } else if let Some(tuple) = TupleRef::from_value(value) {
            tuple.content().to_vec()
        } else if let Some(dict) = DictRef::from_value(value) {
            dict.values().collect()
        } else if let Some(fields) = StructRef::from_value(value) {
            fields.iter().map(|(_, field)| field).collect()
        } else if let Ok(Some(_)) = SetRef::unpack_value(value) {
            value.iterate(heap)?.collect()
        } else {
            continue;
        };
        if children.is_empty() {
            continue;
        }
        if depth >= MAX_JSON_DEPTH {
            return Err(error(format!(
                "in {binding}: the value is nested more than {MAX_JSON_DEPTH} levels deep (or \
                 contains itself); JSON this deep is refused"
            )));
        }
        pending.extend(children.into_iter().map(|child| (child, depth + 1)));
    }
    Ok(())
}

/// A starlark value as JSON, for a host call or `json.encode`.
pub(crate) fn to_json<'v>(
    binding: &str,
    what: &str,
    value: Value<'v>,
    heap: Heap<'v>,
) -> starlark::Result<serde_json::Value> {
    check_depth(binding, value, heap)?;
    convert::to_json(value).map_err(|cause| {
        error(format!(
            "in {binding}: {what} cannot be converted to JSON: {cause}"
        ))
    })
}

/// An optional argument: absent and `None` are the same.
fn present(value: Option<Value>) -> Option<Value> {
    value.filter(|value| !value.is_none())
}

/// A dict argument as a JSON object (absent or `None`: empty).
fn object_argument<'v>(
    binding: &str,
    what: &str,
    value: Option<Value<'v>>,
    heap: Heap<'v>,
) -> starlark::Result<serde_json::Map<String, serde_json::Value>> {
    let Some(value) = present(value) else {
        return Ok(serde_json::Map::new());
    };
    if value.get_type() != "dict" {
        return Err(error(format!(
            "in {binding}: {what} must be a dict, got {}",
            value.get_type()
        )));
    }
    match to_json(binding, what, value, heap)? {
        serde_json::Value::Object(object) => Ok(object),
        _ => Err(error(format!(
            "in {binding}: {what} must be a dict of JSON values"
        ))),
    }
}

type HostFuture = Pin<Box<dyn Future<Output = Result<serde_json::Value, HostError>> + Send>>;

/// How a host call ended, seen from the runtime side.
enum HostAnswer {
    Answered(Result<serde_json::Value, HostError>),
    Cancelled,
    WallTime,
}

/// Runs one host call on the caller's runtime and waits for it on this (the evaluator's)
/// thread. Cancellation and the deadline interrupt the wait.
fn host_call<'v>(
    eval: &mut Evaluator<'v, '_, '_>,
    binding: &str,
    call: impl FnOnce(Arc<dyn Host>) -> HostFuture,
) -> starlark::Result<Value<'v>> {
    let steps = eval.get_total_tick_count();
    let heap = eval.heap();
    let context = context()?;
    context.host_calls.set(context.host_calls.get() + 1);
    context.progress.host_calls.fetch_add(1, Ordering::Relaxed);
    context.progress.steps.fetch_max(steps, Ordering::Relaxed);
    if context.must_stop() {
        return Err(error(format!("in {binding}: the run was stopped")));
    }
    let future = call(Arc::clone(&context.host));
    let cancel = context.cancel.clone();
    let deadline = context.deadline;
    let (answer_sender, answer) = tokio::sync::oneshot::channel();
    context.runtime.spawn(async move {
        let answer = tokio::select! {
            biased;
            () = cancel.cancelled() => HostAnswer::Cancelled,
            () = until(deadline) => HostAnswer::WallTime,
            result = future => HostAnswer::Answered(result),
        };
        // The evaluator only stops listening when it has stopped altogether.
        let _ = answer_sender.send(answer);
    });
    match answer.blocking_recv() {
        Ok(HostAnswer::Answered(Ok(value))) => Ok(heap.alloc(JsonValue(value))),
        Ok(HostAnswer::Answered(Err(HostError::Tool(message)))) => {
            Err(error(format!("in {binding}: {message}")))
        }
        Ok(HostAnswer::Answered(Err(HostError::Platform(message)))) => {
            context.stop_with(Stop::Platform(message.clone()));
            Err(error(format!("in {binding}: {message}")))
        }
        Ok(HostAnswer::Cancelled) => {
            context.stop_with(Stop::Cancelled);
            Err(error(format!("in {binding}: the run was cancelled")))
        }
        Ok(HostAnswer::WallTime) => {
            context.stop_with(Stop::WallTime);
            Err(error(format!("in {binding}: the run ran out of time")))
        }
        Err(_) => {
            let message = "the host call ended without an answer: it panicked, or the runtime \
                           running it is shutting down or has no time driver"
                .to_owned();
            context.stop_with(Stop::Platform(message.clone()));
            Err(error(format!("in {binding}: {message}")))
        }
    }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

#[starlark_module]
fn platform_members(builder: &mut GlobalsBuilder) {
    /// Calls any platform tool by name and returns its structured result (plain text as
    /// `{"text": ...}`).
    fn call<'v>(
        tool: &str,
        args: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<Value<'v>> {
        const BINDING: &str = "platform.call";
        if tool.is_empty() {
            return Err(error(format!(
                "in {BINDING}: tool is empty; name the tool to call, as {BINDING}(\"trino_query\", \
                 {{\"sql\": \"...\"}})"
            )));
        }
        let args = serde_json::Value::Object(object_argument(BINDING, "args", args, eval.heap())?);
        let tool = tool.to_owned();
        host_call(eval, BINDING, move |host| {
            Box::pin(async move { host.call(tool, args).await })
        })
    }

    /// Runs a read-only SQL query; `params` binds `:name` placeholders. Returns
    /// `{"rows": [...], ...}`.
    fn query<'v>(
        sql: &str,
        connection: Option<Value<'v>>,
        params: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<Value<'v>> {
        const BINDING: &str = "platform.query";
        let connection = match present(connection) {
            None => None,
            Some(connection) => Some(
                connection
                    .unpack_str()
                    .ok_or_else(|| {
                        error(format!(
                            "in {BINDING}: connection must be a string, got {}",
                            connection.get_type()
                        ))
                    })?
                    .to_owned(),
            ),
        };
        let params = object_argument(BINDING, "params", params, eval.heap())?;
        let sql = sql.to_owned();
        let result = host_call(eval, BINDING, move |host| {
            Box::pin(async move { host.query(sql, connection, params).await })
        })?;
        let context = context()?;
        context.queries.set(context.queries.get() + 1);
        context.progress.queries.fetch_add(1, Ordering::Relaxed);
        Ok(result)
    }

    /// Writes `rows` (a list of dicts, or a string for a document format) as an output named
    /// `name`. Returns what was written.
    fn export<'v>(
        name: &str,
        rows: Value<'v>,
        #[starlark(default = "csv")] format: &str,
        #[starlark(require = named)] destination: Option<Value<'v>>,
        #[starlark(require = named)] key: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<Value<'v>> {
        const BINDING: &str = "platform.export";
        if present(destination).is_some() || present(key).is_some() {
            return Err(error(format!(
                "in {BINDING}: destination= and key= are not supported here; every output is \
                 written as an asset"
            )));
        }
        let rows = to_json(BINDING, "rows", rows, eval.heap())?;
        let name = name.to_owned();
        let format = format.to_owned();
        let result = host_call(eval, BINDING, move |host| {
            Box::pin(async move { host.export(name, rows, format).await })
        })?;
        let output = to_json(BINDING, "the export's result", result, eval.heap())?;
        let context = context()?;
        context.progress.push_output(output.clone());
        context.outputs.borrow_mut().push(output);
        Ok(result)
    }
}

/// Writes `value` as indented JSON: every line after the first starts with `prefix`, and each
/// level adds `indent`.
fn write_indented(
    binding: &str,
    value: &impl serde::Serialize,
    prefix: &str,
    indent: &str,
) -> starlark::Result<String> {
    let mut bytes = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, formatter);
    value
        .serialize(&mut serializer)
        .map_err(|cause| error(format!("in {binding}: {cause}")))?;
    let text = String::from_utf8(bytes).map_err(|cause| error(format!("in {binding}: {cause}")))?;
    Ok(if prefix.is_empty() {
        text
    } else {
        text.replace('\n', &format!("\n{prefix}"))
    })
}

#[starlark_module]
fn json_members(builder: &mut GlobalsBuilder) {
    /// The JSON text of a value (dicts with string keys, lists, tuples, strings, numbers,
    /// booleans, None).
    fn encode<'v>(
        #[starlark(require = pos)] x: Value<'v>,
        heap: Heap<'v>,
    ) -> starlark::Result<String> {
        check_depth("json.encode", x, heap)?;
        x.to_json()
            .map_err(|cause| error(format!("in json.encode: {cause}")))
    }

    /// The value of a JSON text; `default` instead of an error when the text is not JSON.
    fn decode<'v>(
        #[starlark(require = pos)] x: &str,
        default: Option<Value<'v>>,
        heap: Heap<'v>,
    ) -> starlark::Result<Value<'v>> {
        match serde_json::from_str::<serde_json::Value>(x) {
            Ok(value) => Ok(heap.alloc(JsonValue(value))),
            Err(cause) => default.ok_or_else(|| error(format!("in json.decode: {cause}"))),
        }
    }

    /// A JSON text re-indented.
    fn indent<'v>(
        #[starlark(require = pos)] s: &str,
        #[starlark(require = named, default = "")] prefix: &str,
        #[starlark(require = named, default = "\t")] indent: &str,
    ) -> starlark::Result<String> {
        let value = serde_json::from_str::<serde_json::Value>(s)
            .map_err(|cause| error(format!("in json.indent: {cause}")))?;
        write_indented("json.indent", &value, prefix, indent)
    }

    /// `json.indent(json.encode(x), ...)` in one step.
    fn encode_indent<'v>(
        #[starlark(require = pos)] x: Value<'v>,
        #[starlark(require = named, default = "")] prefix: &str,
        #[starlark(require = named, default = "\t")] indent: &str,
        heap: Heap<'v>,
    ) -> starlark::Result<String> {
        check_depth("json.encode_indent", x, heap)?;
        write_indented("json.encode_indent", &x, prefix, indent)
    }
}

#[starlark_module]
fn date_members(builder: &mut GlobalsBuilder) {
    /// The UTC date (`YYYY-MM-DD`) of an RFC 3339 timestamp such as `run.fire_time`.
    fn of(value: &str) -> starlark::Result<String> {
        date::of(value).map_err(error)
    }

    /// A `YYYY-MM-DD` date, checked.
    fn parse(value: &str) -> starlark::Result<String> {
        date::parse(value).map_err(error)
    }

    /// A date rendered through `YYYY`, `MM` and `DD` in `layout`.
    fn format(value: &str, layout: &str) -> starlark::Result<String> {
        date::format(value, layout).map_err(error)
    }

    /// A date moved by whole days.
    fn add_days(value: &str, days: i64) -> starlark::Result<String> {
        date::add_days(value, days).map_err(error)
    }

    /// A date moved by whole months (an overflowing day rolls into the next month).
    fn add_months(value: &str, months: i64) -> starlark::Result<String> {
        date::add_months(value, months).map_err(error)
    }

    /// Whole days from `start` to `end`.
    fn diff_days(start: &str, end: &str) -> starlark::Result<i64> {
        date::diff_days(start, end).map_err(error)
    }

    /// The first day of the date's month.
    fn start_of_month(value: &str) -> starlark::Result<String> {
        date::start_of_month(value).map_err(error)
    }

    /// The lower-case weekday name.
    fn weekday(value: &str) -> starlark::Result<String> {
        date::weekday(value).map_err(error)
    }
}

#[starlark_module]
fn sum_function(builder: &mut GlobalsBuilder) {
    /// `sum(iterable, start=0)`: the total of ints and floats, left to right. Booleans are
    /// refused: a total that counted `True` as 1 would be a wrong number that looks right.
    fn sum<'v>(
        #[starlark(require = pos)] iterable: Value<'v>,
        #[starlark(default = 0)] start: Value<'v>,
        heap: Heap<'v>,
    ) -> starlark::Result<Value<'v>> {
        let is_number = |value: Value| matches!(value.get_type(), "int" | "float");
        if !is_number(start) {
            return Err(error(format!(
                "in sum: start must be a number, got {}",
                start.get_type()
            )));
        }
        let mut total = start;
        for (index, element) in iterable.iterate(heap)?.enumerate() {
            // A native loop takes no evaluation steps, so it looks for a cancel or the deadline
            // itself: `sum(range(2000000000))` must stop too.
            if index % 4096 == 4095 && context()?.must_stop() {
                return Err(error("in sum: the run was stopped"));
            }
            if !is_number(element) {
                return Err(error(format!(
                    "in sum: element {index} is {}, not a number; a SQL DECIMAL column arrives as \
                     a string, so pass it through float() first",
                    element.get_type()
                )));
            }
            total = total.add(element, heap)?;
        }
        Ok(total)
    }
}

/// Every name a script can use without defining it.
pub(crate) fn predeclared_names() -> HashSet<String> {
    build(&ScriptInput::default())
        .names()
        .map(|name| name.as_str().to_owned())
        .collect()
}

/// The globals of one run: the standard functions, `print`, `set`, and the predeclared names.
pub(crate) fn build(input: &ScriptInput) -> Globals {
    let mut builder =
        GlobalsBuilder::extended_by(&[LibraryExtension::Print, LibraryExtension::SetType]);
    builder.namespace("platform", platform_members);
    builder.namespace("json", json_members);
    builder.namespace("date", date_members);
    sum_function(&mut builder);
    builder.set(
        "run",
        AllocStruct([
            (
                "run_id",
                JsonValue(serde_json::Value::String(input.run_id.clone())),
            ),
            // The fire time a scheduled run is for, pinned; `None` for a run someone started.
            (
                "fire_time",
                JsonValue(
                    input
                        .fire_time
                        .clone()
                        .map_or(serde_json::Value::Null, serde_json::Value::String),
                ),
            ),
            (
                "params",
                JsonValue(serde_json::Value::Object(input.params.clone())),
            ),
        ]),
    );
    builder.build()
}
