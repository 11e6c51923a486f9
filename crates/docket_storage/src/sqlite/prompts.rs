//! The `prompt_library` model on SQLite (synchronous, run on a blocking thread).
//! The row as read is [`rows::PromptRow`].

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use docket_catalog::NewPrompt;
use docket_catalog::prompts::MAX_LISTED;

use super::sql::now;
use crate::columns::TextColumns;
use crate::rows::{self, prompt_columns};
use crate::statement::statement;

/// A library prompt as read.
pub(crate) type PromptRow = rows::PromptRow<TextColumns>;

/// Stores a new prompt.
pub(crate) fn insert(conn: &mut SqliteConnection, prompt: &NewPrompt) -> QueryResult<PromptRow> {
    let (arguments, scripts, shared_with) = rows::prompt_lists(prompt);
    statement(concat!(
        "INSERT INTO prompt_library \
         (name, owner, description, template, arguments, scripts, shared_with) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING ",
        prompt_columns!()
    ))
    .bind::<Text, _>(&prompt.name)
    .bind::<Text, _>(&prompt.owner)
    .bind::<Text, _>(&prompt.description)
    .bind::<Text, _>(&prompt.template)
    .bind::<Text, _>(arguments)
    .bind::<Text, _>(scripts)
    .bind::<Text, _>(shared_with)
    .get_result(conn)
}

/// Replaces everything but the name, owner and creation time.
pub(crate) fn update(
    conn: &mut SqliteConnection,
    prompt: &NewPrompt,
) -> QueryResult<Option<PromptRow>> {
    let (arguments, scripts, shared_with) = rows::prompt_lists(prompt);
    statement(concat!(
        "UPDATE prompt_library SET description = ?2, template = ?3, arguments = ?4, \
         scripts = ?5, shared_with = ?6, updated_at = ",
        now!(),
        " WHERE name = ?1 RETURNING ",
        prompt_columns!()
    ))
    .bind::<Text, _>(&prompt.name)
    .bind::<Text, _>(&prompt.description)
    .bind::<Text, _>(&prompt.template)
    .bind::<Text, _>(arguments)
    .bind::<Text, _>(scripts)
    .bind::<Text, _>(shared_with)
    .get_result(conn)
    .optional()
}

/// The prompt `name`.
pub(crate) fn get(conn: &mut SqliteConnection, name: &str) -> QueryResult<Option<PromptRow>> {
    statement(concat!(
        "SELECT ",
        prompt_columns!(),
        " FROM prompt_library WHERE name = ?1"
    ))
    .bind::<Text, _>(name)
    .get_result(conn)
    .optional()
}

/// Every prompt by name, at most [`MAX_LISTED`].
pub(crate) fn list(conn: &mut SqliteConnection) -> QueryResult<Vec<PromptRow>> {
    statement(concat!(
        "SELECT ",
        prompt_columns!(),
        " FROM prompt_library ORDER BY name LIMIT ?1"
    ))
    .bind::<BigInt, _>(i64::from(MAX_LISTED))
    .load(conn)
}

/// Deletes the prompt `name`; whether there was one.
pub(crate) fn delete(conn: &mut SqliteConnection, name: &str) -> QueryResult<bool> {
    statement("DELETE FROM prompt_library WHERE name = ?1")
        .bind::<Text, _>(name)
        .execute(conn)
        .map(|deleted| deleted == 1)
}
