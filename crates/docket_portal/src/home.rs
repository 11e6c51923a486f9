//! `GET /portal`: the signed-in person's start page; `GET
//! /portal/signed-out`: what a logout ends on.

use askama::Template;
use http::StatusCode;
use time::format_description::well_known::Rfc3339;

use crate::csrf;
use crate::reply::{Reply, message, page};
use crate::session::SignedIn;

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage<'a> {
    display_name: &'a str,
    subject: &'a str,
    administrator: bool,
    csrf: String,
    expires_at: String,
}

pub(crate) fn handle(signed_in: &SignedIn) -> Reply {
    let session = &signed_in.session;
    page(
        StatusCode::OK,
        &HomePage {
            display_name: &session.display_name,
            subject: &session.subject,
            administrator: session.administrator,
            csrf: csrf::token(&signed_in.id),
            expires_at: session
                .expires_at
                .format(&Rfc3339)
                .unwrap_or_else(|_| "its expiry".to_owned()),
        },
    )
}

pub(crate) fn signed_out() -> Reply {
    message(
        StatusCode::OK,
        "Logged out",
        "You are logged out of the portal.",
    )
}
