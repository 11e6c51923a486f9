//! The `prompt_library` model on PostgreSQL. The row as read is [`rows::PromptRow`].

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Bool, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use docket_catalog::prompts::MAX_PAGE;
use docket_catalog::{CatalogError, LibraryPrompt, NewPrompt, PageCursor, PromptViewer};

use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::rows::{self, prompt_columns};
use crate::statement::statement;

type PromptRow = rows::PromptRow<PgColumns>;

/// Stores a new prompt unless its owner already owns `owner_limit`. The owner's
/// creates take turns on a transaction-scoped advisory lock, so the count each one
/// reads includes every create committed before it: racing creates never pass the
/// limit.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    prompt: &NewPrompt,
    owner_limit: u32,
) -> Result<LibraryPrompt, CatalogError> {
    let (arguments, scripts, shared_with) = rows::prompt_lists(prompt);
    let inserted = conn
        .transaction(async |conn| {
            statement("SELECT pg_advisory_xact_lock(hashtext('prompt_library'), hashtext($1))")
                .bind::<Text, _>(&prompt.owner)
                .execute(conn)
                .await?;
            statement(concat!(
                "INSERT INTO prompt_library \
                 (name, owner, description, template, arguments, scripts, shared_with) \
                 SELECT $1, $2, $3, $4, $5, $6, $7 \
                  WHERE (SELECT count(*) FROM prompt_library WHERE owner = $2) < $8 \
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
            .get_result::<PromptRow>(conn)
            .await
            .optional()
        })
        .await
        .map_err(catalog_query_error)?;
    match inserted {
        Some(row) => row.into_prompt(),
        None => Err(CatalogError::LimitReached(owner_limit)),
    }
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

/// A page of the prompts `viewer` may see, newest first, strictly before `before`.
/// Who sees what is [`LibraryPrompt::visible_to`], in SQL: administrators see all,
/// owners their own, and a prompt shared with `*` or the viewer's persona.
pub(crate) async fn list(
    conn: &mut AsyncPgConnection,
    viewer: &PromptViewer<'_>,
    before: Option<&PageCursor>,
    limit: u32,
) -> Result<Vec<LibraryPrompt>, CatalogError> {
    statement(concat!(
        "SELECT ",
        prompt_columns!(),
        " FROM prompt_library \
          WHERE ($1 OR owner = $2 OR shared_with::jsonb @> '[\"*\"]'::jsonb \
                 OR ($3::text IS NOT NULL AND shared_with::jsonb @> jsonb_build_array($3::text))) \
            AND ($4::timestamptz IS NULL OR (created_at, name) < ($4, $5)) \
          ORDER BY created_at DESC, name DESC LIMIT $6"
    ))
    .bind::<Bool, _>(viewer.is_admin)
    .bind::<Text, _>(viewer.subject)
    .bind::<Nullable<Text>, _>(viewer.persona)
    .bind::<Nullable<Timestamptz>, _>(before.map(|cursor| cursor.created_at))
    .bind::<Nullable<Text>, _>(before.map(|cursor| cursor.id.as_str()))
    .bind::<BigInt, _>(i64::from(limit.min(MAX_PAGE)))
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
