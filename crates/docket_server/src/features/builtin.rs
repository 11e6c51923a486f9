//! The prompts that come with the prompt library, for common data work: exploring
//! a table, exporting a query, writing a script. Each fills its arguments into a
//! text that tells the model which Docket tools to use.

use docket_protocol::prompts::PromptMessage;

use super::prompts::{PromptOutcome, PromptRequest, PromptSpec};
use crate::registry::ToolError;

/// Explores a table.
pub(crate) const EXPLORE_TABLE: &str = "explore_table";
/// Exports a query's result.
pub(crate) const EXPORT_QUERY: &str = "export_query";
/// Writes a managed script.
pub(crate) const WRITE_SCRIPT: &str = "write_script";

/// The built-in prompts, each with the argument that names a script besides those
/// named like one (`write_script`'s `name`: the script to write, or to rewrite):
/// the platform completes their arguments.
pub(crate) const BUILT_IN_PROMPTS: &[(&str, Option<&str>)] = &[
    (EXPLORE_TABLE, None),
    (EXPORT_QUERY, None),
    (WRITE_SCRIPT, Some("name")),
];

/// What a built-in prompt says for a request.
pub(crate) type Text = fn(&PromptRequest) -> String;

/// The built-in prompts and what each says.
pub(crate) fn prompts() -> Vec<(PromptSpec, Text)> {
    vec![
        (
            PromptSpec::new(
                EXPLORE_TABLE,
                "Explore a table: its columns, size and what stands out.",
            )
            .with_argument("table", "The table, as catalog.schema.table.", true)
            .with_argument(
                "connection",
                "The Trino connection (default: the default one).",
                false,
            ),
            explore_table,
        ),
        (
            PromptSpec::new(
                EXPORT_QUERY,
                "Export the result of a question as a file the team can download.",
            )
            .with_argument("question", "What the export should answer, in words.", true)
            .with_argument(
                "format",
                "csv, json, jsonl or parquet (default csv).",
                false,
            )
            .with_argument(
                "connection",
                "The Trino connection (default: the default one).",
                false,
            )
            .with_argument(
                "schema",
                "Where the data lives, as catalog.schema (optional).",
                false,
            ),
            export_query,
        ),
        (
            PromptSpec::new(
                WRITE_SCRIPT,
                "Write, check and save a managed Starlark script.",
            )
            .with_argument("goal", "What the script should do.", true)
            .with_argument(
                "name",
                "The name to save it under (an existing script's to rewrite it).",
                false,
            ),
            write_script,
        ),
    ]
}

fn given(request: &PromptRequest, name: &str, fallback: &str) -> String {
    request
        .arguments
        .get(name)
        .filter(|value| !value.trim().is_empty())
        .cloned()
        .unwrap_or_else(|| fallback.to_owned())
}

fn explore_table(request: &PromptRequest) -> String {
    let table = given(request, "table", "");
    let connection = given(request, "connection", "the default connection");
    format!(
        "Explore the table {table} on {connection}. Use trino_describe_table for its columns, \
         then trino_query for its row count and a sample of ten rows, and for the columns that \
         look most useful, their distinct counts and null shares. Report what the table holds, \
         its grain, and anything that stands out. Read only: never change data."
    )
}

fn export_query(request: &PromptRequest) -> String {
    let question = given(request, "question", "");
    let format = given(request, "format", "csv");
    let connection = given(request, "connection", "the default connection");
    let place = match request
        .arguments
        .get("schema")
        .filter(|schema| !schema.trim().is_empty())
    {
        Some(schema) => format!("in {schema} "),
        None => String::new(),
    };
    format!(
        "Answer this with an export: {question}. First find the tables {place}on {connection} \
         with trino_browse and trino_describe_table, and check the statement with trino_query \
         and a small LIMIT. Then run trino_export with format {format}, a clear name and an \
         idempotency_key, and give the download URL and the row count."
    )
}

fn write_script(request: &PromptRequest) -> String {
    let goal = given(request, "goal", "");
    let name = given(request, "name", "a short, descriptive name");
    format!(
        "Write a Starlark script that does this: {goal}. Call manage_script with command \
         validate until it passes, then create to save it as {name}, and run it with \
         run_script. Scripts reach data only through platform.query and platform.call; keep \
         them short and print what they find."
    )
}

/// The outcome a built-in prompt answers with.
pub(crate) fn outcome(text: String) -> Result<PromptOutcome, ToolError> {
    Ok(PromptOutcome::Messages {
        description: None,
        messages: vec![PromptMessage::user(text)],
    })
}
