//! The `prompt_library` model on SQLite (synchronous, run on a blocking thread).
//! The row as read is [`rows::PromptRow`].

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use docket_catalog::prompts::MAX_PAGE;
use docket_catalog::{NewPrompt, PromptViewer};

use super::sql::now;
use crate::columns::TextColumns;
use crate::rows::{self, prompt_columns};
use crate::statement::statement;

/// A library prompt as read.
pub(crate) type PromptRow = rows::PromptRow<TextColumns>;

/// Stores a new prompt unless its owner already owns `owner_limit`; `None` when
/// they do. One statement, and SQLite runs one writer at a time: racing creates
/// never pass the limit.
pub(crate) fn insert(
    conn: &mut SqliteConnection,
    prompt: &NewPrompt,
    owner_limit: u32,
) -> QueryResult<Option<PromptRow>> {
    let (arguments, scripts, shared_with) = rows::prompt_lists(prompt);
    statement(concat!(
        "INSERT INTO prompt_library \
         (name, owner, description, template, arguments, scripts, shared_with) \
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
          WHERE (SELECT count(*) FROM prompt_library WHERE owner = ?2) < ?8 \
         RETURNING ",
        prompt_columns!()
    ))
    .bind::<Text, _>(&prompt.name)
    .bind::<Text, _>(&prompt.owner)
    .bind::<Text, _>(&prompt.description)
    .bind::<Text, _>(&prompt.template)
    .bind::<Text, _>(arguments)
    .bind::<Text, _>(scripts)
    .bind::<Text, _>(shared_with)
    .bind::<BigInt, _>(i64::from(owner_limit))
    .get_result(conn)
    .optional()
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

/// A page of the prompts `viewer` may see, newest first, strictly before `before`
/// (a creation time in the stored form, and a name). Who sees what is
/// [`docket_catalog::LibraryPrompt::visible_to`], in SQL.
pub(crate) fn list(
    conn: &mut SqliteConnection,
    viewer: &PromptViewer<'_>,
    before: Option<(&str, &str)>,
    limit: u32,
) -> QueryResult<Vec<PromptRow>> {
    statement(concat!(
        "SELECT ",
        prompt_columns!(),
        " FROM prompt_library \
          WHERE (?1 OR owner = ?2 OR EXISTS ( \
                   SELECT 1 FROM json_each(prompt_library.shared_with) AS shared \
                    WHERE shared.value = '*' OR shared.value = ?3)) \
            AND (?4 IS NULL OR created_at < ?4 OR (created_at = ?4 AND name < ?5)) \
          ORDER BY created_at DESC, name DESC LIMIT ?6"
    ))
    .bind::<Bool, _>(viewer.is_admin)
    .bind::<Text, _>(viewer.subject)
    .bind::<Nullable<Text>, _>(viewer.persona)
    .bind::<Nullable<Text>, _>(before.map(|(created_at, _)| created_at))
    .bind::<Nullable<Text>, _>(before.map(|(_, name)| name))
    .bind::<BigInt, _>(i64::from(limit.min(MAX_PAGE)))
    .load(conn)
}

/// Deletes the prompt `name`; whether there was one.
pub(crate) fn delete(conn: &mut SqliteConnection, name: &str) -> QueryResult<bool> {
    statement("DELETE FROM prompt_library WHERE name = ?1")
        .bind::<Text, _>(name)
        .execute(conn)
        .map(|deleted| deleted == 1)
}
