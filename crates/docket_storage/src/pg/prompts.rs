//! The `prompt_library` model on PostgreSQL. The row as read is [`rows::PromptRow`].

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use docket_catalog::prompts::MAX_LISTED;
use docket_catalog::{CatalogError, LibraryPrompt, NewPrompt};

use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::rows::{self, prompt_columns};
use crate::statement::statement;

type PromptRow = rows::PromptRow<PgColumns>;

/// Stores a new prompt.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    prompt: &NewPrompt,
) -> Result<LibraryPrompt, CatalogError> {
    let (arguments, scripts, shared_with) = rows::prompt_lists(prompt);
    statement(concat!(
        "INSERT INTO prompt_library \
         (name, owner, description, template, arguments, scripts, shared_with) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ",
        prompt_columns!()
    ))
    .bind::<Text, _>(&prompt.name)
    .bind::<Text, _>(&prompt.owner)
    .bind::<Text, _>(&prompt.description)
    .bind::<Text, _>(&prompt.template)
    .bind::<Text, _>(arguments)
    .bind::<Text, _>(scripts)
    .bind::<Text, _>(shared_with)
    .get_result::<PromptRow>(conn)
    .await
    .map_err(catalog_query_error)?
    .into_prompt()
}

/// Replaces everything but the name, owner and creation time.
pub(crate) async fn update(
    conn: &mut AsyncPgConnection,
    prompt: &NewPrompt,
) -> Result<Option<LibraryPrompt>, CatalogError> {
    let (arguments, scripts, shared_with) = rows::prompt_lists(prompt);
    statement(concat!(
        "UPDATE prompt_library SET description = $2, template = $3, arguments = $4, \
         scripts = $5, shared_with = $6, updated_at = now() WHERE name = $1 RETURNING ",
        prompt_columns!()
    ))
    .bind::<Text, _>(&prompt.name)
    .bind::<Text, _>(&prompt.description)
    .bind::<Text, _>(&prompt.template)
    .bind::<Text, _>(arguments)
    .bind::<Text, _>(scripts)
    .bind::<Text, _>(shared_with)
    .get_result::<PromptRow>(conn)
    .await
    .optional()
    .map_err(catalog_query_error)?
    .map(PromptRow::into_prompt)
    .transpose()
}

/// The prompt `name`.
pub(crate) async fn get(
    conn: &mut AsyncPgConnection,
    name: &str,
) -> Result<Option<LibraryPrompt>, CatalogError> {
    statement(concat!(
        "SELECT ",
        prompt_columns!(),
        " FROM prompt_library WHERE name = $1"
    ))
    .bind::<Text, _>(name)
    .get_result::<PromptRow>(conn)
    .await
    .optional()
    .map_err(catalog_query_error)?
    .map(PromptRow::into_prompt)
    .transpose()
}

/// Every prompt by name, at most [`MAX_LISTED`].
pub(crate) async fn list(conn: &mut AsyncPgConnection) -> Result<Vec<LibraryPrompt>, CatalogError> {
    statement(concat!(
        "SELECT ",
        prompt_columns!(),
        " FROM prompt_library ORDER BY name LIMIT $1"
    ))
    .bind::<BigInt, _>(i64::from(MAX_LISTED))
    .load::<PromptRow>(conn)
    .await
    .map_err(catalog_query_error)?
    .into_iter()
    .map(PromptRow::into_prompt)
    .collect()
}

/// Deletes the prompt `name`; whether there was one.
pub(crate) async fn delete(conn: &mut AsyncPgConnection, name: &str) -> Result<bool, CatalogError> {
    statement("DELETE FROM prompt_library WHERE name = $1")
        .bind::<Text, _>(name)
        .execute(conn)
        .await
        .map_err(catalog_query_error)
        .map(|deleted| deleted == 1)
}

/// Signals a catalog change (`prompts`, `assets:<owner>`) on `docket_changes`.
pub(crate) async fn notify_change(
    conn: &mut AsyncPgConnection,
    payload: &str,
) -> Result<(), CatalogError> {
    statement("SELECT pg_notify($1, $2)")
        .bind::<Text, _>(super::listen::CHANGE_CHANNEL)
        .bind::<Text, _>(payload)
        .execute(conn)
        .await
        .map_err(catalog_query_error)
        .map(drop)
}
