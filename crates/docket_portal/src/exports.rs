//! `GET /portal/exports`: the person's exports, newest first, searchable by
//! name; `GET /portal/exports/{id}`: one export, with a viewer that pages
//! through its rows on the server (the desk reads only the page asked for,
//! so a million-row export opens as fast as a small one), its download and
//! its shares; `POST /portal/exports/{id}/share` and `…/revoke` make and end
//! a share.

use askama::Template;
use http::StatusCode;
use serde_json::{Map, Value, json};

use crate::desk::{Desk, DeskError, RowPage};
use crate::form::CheckedForm;
use crate::nav::{Nav, failed, person};
use crate::reply::{Reply, page, redirect};
use crate::session::SignedIn;

/// Rows on one page of the viewer.
pub(crate) const PAGE_ROWS: usize = 100;

/// Exports listed on one page.
const LIST_PAGE: u64 = 50;

/// How many of the newest exports a search reads, at most.
const SEARCH_LIMIT: usize = 2_000;

/// The longest search text.
const MAX_SEARCH_CHARS: usize = 200;

/// One export as the pages show it.
pub(crate) struct AssetLine {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) format: String,
    pub(crate) rows: String,
    pub(crate) size: String,
    pub(crate) created_at: String,
    pub(crate) tool: String,
    pub(crate) download_url: String,
}

impl AssetLine {
    fn from_json(asset: &Value) -> Option<Self> {
        let text = |key: &str| {
            asset
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let number = |key: &str| {
            asset
                .get(key)
                .and_then(Value::as_u64)
                .map_or_else(|| "—".to_owned(), |n| n.to_string())
        };
        Some(Self {
            id: asset.get("asset_id").and_then(Value::as_str)?.to_owned(),
            name: text("name"),
            format: text("format"),
            rows: number("row_count"),
            size: number("size_bytes"),
            created_at: text("created_at"),
            tool: text("tool"),
            download_url: text("download_url"),
        })
    }
}

#[derive(Template)]
#[template(path = "exports.html")]
struct ExportsPage {
    nav: Nav,
    search: String,
    assets: Vec<AssetLine>,
    next: Option<String>,
    searched_all: bool,
    search_limit: usize,
}

fn field(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

pub(crate) async fn list(signed_in: &SignedIn, desk: &dyn Desk, query: &str) -> Reply {
    let person = person(signed_in);
    let search: String = field(query, "search")
        .unwrap_or_default()
        .trim()
        .chars()
        .take(MAX_SEARCH_CHARS)
        .collect();
    let needle = search.to_lowercase();
    let mut cursor = field(query, "cursor").filter(|cursor| !cursor.is_empty());
    let mut assets = Vec::new();
    let mut read = 0;
    // Without a search, one page; with one, pages until a page's worth match
    // or the newest SEARCH_LIMIT were read.
    loop {
        let mut arguments = json!({"limit": if needle.is_empty() { LIST_PAGE } else { 200 }});
        if let Some(cursor) = &cursor {
            arguments["cursor"] = Value::String(cursor.clone());
        }
        let answer = match desk.call(&person, "list_assets", arguments).await {
            Ok(answer) => answer,
            Err(error) => return failed(&error),
        };
        let listed = answer
            .get("assets")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        read += listed.len();
        assets.extend(
            listed
                .iter()
                .filter_map(AssetLine::from_json)
                .filter(|asset| needle.is_empty() || asset.name.to_lowercase().contains(&needle)),
        );
        cursor = answer
            .get("next_cursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if needle.is_empty()
            || cursor.is_none()
            || assets.len() >= LIST_PAGE as usize
            || read >= SEARCH_LIMIT
        {
            break;
        }
    }
    let searched_all = !needle.is_empty() && read >= SEARCH_LIMIT;
    page(
        StatusCode::OK,
        &ExportsPage {
            nav: Nav::of(signed_in),
            search,
            assets,
            next: cursor,
            searched_all,
            search_limit: SEARCH_LIMIT,
        },
    )
}

#[derive(Template)]
#[template(path = "export.html")]
struct ExportPage {
    nav: Nav,
    asset: AssetLine,
    view: Result<RowPage, String>,
    previous: Option<u64>,
    next: Option<u64>,
    made: Option<String>,
    shares: String,
}

pub(crate) async fn show(signed_in: &SignedIn, desk: &dyn Desk, id: &str, query: &str) -> Reply {
    // `row` counts from 1, as the page shows it.
    let first_row = field(query, "row")
        .and_then(|row| row.trim().parse::<u64>().ok())
        .map_or(0, |row| row.saturating_sub(1));
    render(signed_in, desk, id, first_row, None).await
}

/// The page of export `id` from row `first_row`, with the link just made
/// (the link is shown once, in the answer to the form, never put in a URL).
async fn render(
    signed_in: &SignedIn,
    desk: &dyn Desk,
    id: &str,
    first_row: u64,
    made: Option<String>,
) -> Reply {
    let person = person(signed_in);
    let asset = match desk
        .call(&person, "get_asset", json!({"asset_id": id}))
        .await
        .map(|answer| AssetLine::from_json(&answer))
    {
        Ok(Some(asset)) => asset,
        // The tools' "not found" and "not yours" are one answer, and so here.
        Ok(None) | Err(DeskError::NotFound | DeskError::Refused(_)) => {
            return failed(&DeskError::NotFound);
        }
        Err(error) => return failed(&error),
    };
    let view = match desk.rows(&person, &asset.id, first_row, PAGE_ROWS).await {
        Ok(rows) => Ok(rows),
        Err(DeskError::NotFound) => return failed(&DeskError::NotFound),
        Err(error) => Err(error.to_string()),
    };
    let step = PAGE_ROWS as u64;
    let (previous, next) = match &view {
        Ok(rows) => (
            (rows.first_row > 0).then(|| rows.first_row.saturating_sub(step) + 1),
            rows.more.then(|| rows.first_row + step + 1),
        ),
        Err(_) => (None, None),
    };
    let shares = crate::nav::Section::answer(
        "shares",
        "",
        desk.call(
            &person,
            "share_asset",
            json!({"command": "list", "asset_id": asset.id}),
        )
        .await,
    )
    .html;
    page(
        StatusCode::OK,
        &ExportPage {
            nav: Nav::of(signed_in),
            asset,
            view,
            previous,
            next,
            made,
            shares,
        },
    )
}

pub(crate) async fn share(
    signed_in: &SignedIn,
    desk: &dyn Desk,
    id: &str,
    form: &CheckedForm,
) -> Reply {
    let person = person(signed_in);
    let mut arguments = Map::new();
    arguments.insert("command".into(), json!("create"));
    arguments.insert("asset_id".into(), json!(id));
    arguments.insert(
        "audience".into(),
        json!(form.get("audience").unwrap_or("people")),
    );
    if let Some(seconds) = form
        .get("expires_in_seconds")
        .and_then(|text| text.parse::<u64>().ok())
    {
        arguments.insert("expires_in_seconds".into(), json!(seconds));
    }
    if form.get("audience") == Some("people") {
        let people: Vec<&str> = form
            .get("people")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|person| !person.is_empty())
            .collect();
        arguments.insert("people".into(), json!(people));
    }
    match desk
        .call(&person, "share_asset", Value::Object(arguments))
        .await
    {
        Ok(answer) => {
            let url = answer.get("url").and_then(Value::as_str).map(str::to_owned);
            render(signed_in, desk, id, 0, url).await
        }
        Err(error) => failed(&error),
    }
}

pub(crate) async fn revoke(
    signed_in: &SignedIn,
    desk: &dyn Desk,
    id: &str,
    form: &CheckedForm,
) -> Reply {
    let share_id = form.get("share_id").unwrap_or_default().trim();
    match desk
        .call(
            &person(signed_in),
            "share_asset",
            json!({"command": "revoke", "share_id": share_id}),
        )
        .await
    {
        Ok(_) => redirect(&format!("/portal/exports/{id}"), &[]),
        Err(error) => failed(&error),
    }
}
