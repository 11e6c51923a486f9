//! The pages that show tool answers as they are: `GET /portal/scripts` (the
//! person's scripts and schedules), `GET /portal/scripts/{name}` (one
//! script's current version, a diff between versions, its runs and its
//! schedule with the next and missed fires) and `GET /portal/prompts` (the
//! prompt library as the person's persona sees it). Each answer comes from
//! the same tool a client would call, as the person.

use serde_json::{Value, json};

use crate::desk::{Desk, DeskError};
use crate::nav::{Nav, Section, answers, failed, person};
use crate::render::escape;
use crate::reply::Reply;
use crate::session::SignedIn;

/// The longest script name a path may carry.
const MAX_NAME_CHARS: usize = 200;

/// The most versions the script page links.
const MAX_VERSION_LINKS: usize = 50;

pub(crate) async fn scripts(signed_in: &SignedIn, desk: &dyn Desk) -> Reply {
    let person = person(signed_in);
    let listed = desk
        .call(&person, "manage_script", json!({"command": "list"}))
        .await;
    let links = match &listed {
        Ok(answer) => script_links(answer),
        Err(_) => String::new(),
    };
    let schedules = desk
        .call(
            &person,
            "manage_script",
            json!({"command": "schedule_list"}),
        )
        .await;
    let mut sections = vec![Section {
        id: "script-links",
        heading: String::new(),
        html: links,
    }];
    sections.push(Section::answer("scripts", "Scripts", listed));
    sections.push(Section::answer("schedules", "Schedules", schedules));
    answers(Nav::of(signed_in), "My scripts", sections)
}

/// A link to each listed script's page.
fn script_links(answer: &Value) -> String {
    let names: Vec<&str> = answer
        .get("scripts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|script| script.get("name").and_then(Value::as_str))
        .collect();
    if names.is_empty() {
        return "<p>No scripts.</p>".to_owned();
    }
    let mut html = String::from("<ul>");
    for name in names {
        let path: String = form_urlencoded::byte_serialize(name.as_bytes()).collect();
        html.push_str(&format!(
            "<li><a href=\"/portal/scripts/{}\">{}</a></li>",
            escape(&path),
            escape(name)
        ));
    }
    html.push_str("</ul>");
    html
}

pub(crate) async fn script(
    signed_in: &SignedIn,
    desk: &dyn Desk,
    name: &str,
    query: &str,
) -> Reply {
    let Ok(name) = percent_decoded(name) else {
        return failed(&DeskError::NotFound);
    };
    let person = person(signed_in);
    let script = match desk
        .call(
            &person,
            "manage_script",
            json!({"command": "get", "name": name}),
        )
        .await
    {
        Ok(answer) => answer,
        // "Not found" and "not yours" are one answer in the tools, and here.
        Err(DeskError::Refused(_) | DeskError::NotFound) => return failed(&DeskError::NotFound),
        Err(error) => return failed(&error),
    };
    let mut diff = json!({"command": "diff", "name": name});
    for key in ["from_version", "to_version"] {
        if let Some(version) = form_urlencoded::parse(query.as_bytes())
            .find(|(field, _)| field == key)
            .and_then(|(_, value)| value.parse::<u64>().ok())
        {
            diff[key] = json!(version);
        }
    }
    let diff = desk.call(&person, "manage_script", diff).await;
    let runs = desk
        .call(
            &person,
            "manage_script",
            json!({"command": "runs", "name": name}),
        )
        .await;
    let schedule = desk
        .call(
            &person,
            "manage_script",
            json!({"command": "schedule_list", "name": name}),
        )
        .await;
    let sections = vec![
        Section {
            id: "versions",
            heading: "Versions".to_owned(),
            html: version_links(&name, &script),
        },
        Section::of("script", "Current version", &script),
        Section::answer("diff", "Changes between versions", diff),
        Section::answer("runs", "Runs", runs),
        Section::answer("schedule", "Schedule", schedule),
    ];
    answers(Nav::of(signed_in), &format!("Script {name}"), sections)
}

/// A link to each version's changes from the one before it, newest first
/// (at most [`MAX_VERSION_LINKS`]).
fn version_links(name: &str, script: &Value) -> String {
    let newest = script.get("version").and_then(Value::as_u64).unwrap_or(1);
    let path: String = form_urlencoded::byte_serialize(name.as_bytes()).collect();
    let mut html = format!("<p>Version {newest} is current.</p>");
    if newest > 1 {
        html.push_str("<ul>");
        for version in (2..=newest).rev().take(MAX_VERSION_LINKS) {
            html.push_str(&format!(
                "<li><a href=\"/portal/scripts/{}?from_version={}&amp;to_version={version}#diff\">\
                 Version {version}: its changes</a></li>",
                escape(&path),
                version - 1
            ));
        }
        html.push_str("</ul>");
    }
    html
}

/// A path segment, percent-decoded, when it is UTF-8 of a bounded length.
fn percent_decoded(segment: &str) -> Result<String, ()> {
    let bytes: Vec<u8> = percent_bytes(segment).ok_or(())?;
    let text = String::from_utf8(bytes).map_err(drop)?;
    if text.is_empty() || text.chars().count() > MAX_NAME_CHARS {
        return Err(());
    }
    Ok(text)
}

fn percent_bytes(segment: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(segment.len());
    let bytes = segment.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = bytes.get(at + 1..at + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    Some(out)
}

pub(crate) async fn prompts(signed_in: &SignedIn, desk: &dyn Desk) -> Reply {
    let listed = desk
        .call(
            &person(signed_in),
            "manage_prompt",
            json!({"command": "list"}),
        )
        .await;
    answers(
        Nav::of(signed_in),
        "Prompts",
        vec![Section::answer("prompts", "", listed)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_paths_decode_or_are_refused() {
        assert_eq!(
            percent_decoded("daily%20sales"),
            Ok("daily sales".to_owned())
        );
        assert_eq!(percent_decoded("a%2"), Err(()));
        assert_eq!(percent_decoded("%ff"), Err(()));
        assert_eq!(percent_decoded(""), Err(()));
        assert_eq!(percent_decoded(&"x".repeat(201)), Err(()));
    }
}
