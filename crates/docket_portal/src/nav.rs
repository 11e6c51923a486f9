//! What every signed-in page shares: the header's links and the person, and
//! the generic page of a tool's answers.

use askama::Template;
use http::StatusCode;

use crate::authority::Person;
use crate::csrf;
use crate::desk::DeskError;
use crate::reply::{Reply, message, not_found, page};
use crate::session::SignedIn;

/// The header of a signed-in page.
pub(crate) struct Nav {
    pub(crate) display_name: String,
    pub(crate) administrator: bool,
    /// The session's CSRF token, for every form on the page.
    pub(crate) csrf: String,
}

impl Nav {
    pub(crate) fn of(signed_in: &SignedIn) -> Self {
        Self {
            display_name: signed_in.session.display_name.clone(),
            administrator: signed_in.session.administrator,
            csrf: csrf::token(&signed_in.id),
        }
    }
}

/// The person a session is, as the desk is asked for them.
pub(crate) fn person(signed_in: &SignedIn) -> Person {
    let session = &signed_in.session;
    Person {
        subject: session.subject.clone(),
        display_name: session.display_name.clone(),
        roles: session.roles.clone(),
        administrator: session.administrator,
    }
}

/// One part of a page of answers.
pub(crate) struct Section {
    /// Its element id (tests and links find it by this).
    pub(crate) id: &'static str,
    pub(crate) heading: String,
    /// Already escaped HTML ([`crate::render`]).
    pub(crate) html: String,
}

impl Section {
    /// A part showing `value` ([`crate::render::html`]).
    pub(crate) fn of(id: &'static str, heading: &str, value: &serde_json::Value) -> Self {
        Self {
            id,
            heading: heading.to_owned(),
            html: crate::render::html(value),
        }
    }

    /// A part saying why its answer is missing, or the answer.
    pub(crate) fn answer(
        id: &'static str,
        heading: &str,
        answer: Result<serde_json::Value, DeskError>,
    ) -> Self {
        match answer {
            Ok(value) => Self::of(id, heading, &value),
            Err(error) => Self {
                id,
                heading: heading.to_owned(),
                html: format!(
                    "<p class=\"note\">{}</p>",
                    crate::render::escape(&error.to_string())
                ),
            },
        }
    }
}

#[derive(Template)]
#[template(path = "answer.html")]
struct AnswerPage<'a> {
    nav: Nav,
    title: &'a str,
    sections: Vec<Section>,
}

/// A page of sections.
pub(crate) fn answers(nav: Nav, title: &str, sections: Vec<Section>) -> Reply {
    page(
        StatusCode::OK,
        &AnswerPage {
            nav,
            title,
            sections,
        },
    )
}

/// The page for a desk error.
pub(crate) fn failed(error: &DeskError) -> Reply {
    match error {
        DeskError::NotFound => not_found(),
        DeskError::Refused(why) => message(StatusCode::BAD_REQUEST, "Refused", why),
        DeskError::Unavailable(why) => {
            tracing::warn!(%why, "a portal page could not be answered");
            message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "Docket cannot answer this right now. Try again shortly.",
            )
        }
    }
}
