//! `GET /portal`: the signed-in person's start page; `GET
//! /portal/signed-out`: what a logout ends on.

use askama::Template;
use http::StatusCode;
use time::format_description::well_known::Rfc3339;

use crate::nav::Nav;
use crate::reply::{Reply, message, page};
use crate::session::SignedIn;

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage<'a> {
    nav: Nav,
    subject: &'a str,
    expires_at: String,
}

pub(crate) fn handle(signed_in: &SignedIn) -> Reply {
    let session = &signed_in.session;
    page(
        StatusCode::OK,
        &HomePage {
            nav: Nav::of(signed_in),
            subject: &session.subject,
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
