//! Serving an asset's bytes to a browser: every download, by bearer token, by
//! signed link or by share, is an attachment with a safe file name, `nosniff`
//! and a sandbox CSP, so nothing stored in an asset (an API export's HTML, say)
//! runs as a page of this origin. Opening a signed link or a share is here too:
//! each open spends its client address's allowance, reads the asset's row (a
//! deleted asset stops every link at once), and a share's open is counted and
//! audited.

use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use docket_catalog::{Asset, ShareAudience};
use docket_export::sink::ObjectContent;
use docket_task::store::{AuditContext, AuditEntry};
use futures_util::StreamExt as _;
use http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;
use time::OffsetDateTime;

use crate::assets::Assets;
use crate::auth::AuthError;
use crate::holds::Hold;
use crate::links::codec::LinkError;
use crate::opener::{Opener, who_is_opening};
use crate::state::App;

/// A download's body: the asset's bytes as they stream from the object store.
pub(crate) type DownloadBody = UnsyncBoxBody<Bytes, Infallible>;

/// The sandbox every download is served under: a browser that renders it anyway
/// runs no script, loads nothing, and treats it as a unique origin.
pub(crate) const SANDBOX_CSP: &str = "sandbox; default-src 'none'";

/// The most characters of a download's file name.
const MAX_FILE_NAME_CHARS: usize = 100;

/// Why a link did not open; `http` answers each.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Unknown, forged, revoked, not for this person, or its asset is gone: one answer.
    NotFound,
    /// A genuine signed link past its expiry.
    Expired,
    /// The client address opened too much; try again after this long.
    TooMany(Duration),
    /// The share needs a signed-in person, and the request's credentials say
    /// nobody (or are not valid).
    Auth(AuthError),
    /// The opener already holds as much of the server as one may.
    Busy(String),
    /// A store could not be read.
    Unavailable,
}

/// A name for the file a browser saves: the asset's name (or `asset`) in
/// letters, digits, `.`, `-` and `_` only, with the format as its extension, so
/// no quote, separator or control character reaches the header.
pub(crate) fn file_name(asset: &Asset) -> String {
    let safe = |text: &str| -> String {
        text.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let mut stem = safe(&asset.name).trim_matches('.').to_owned();
    if stem.is_empty() {
        stem = "asset".to_owned();
    }
    let extension = safe(&asset.format).trim_matches('.').to_owned();
    let mut name = if extension.is_empty() || stem.ends_with(&format!(".{extension}")) {
        stem
    } else {
        format!("{stem}.{extension}")
    };
    if name.len() > MAX_FILE_NAME_CHARS {
        // ASCII only, so any byte index is a character boundary.
        name = name[name.len() - MAX_FILE_NAME_CHARS..]
            .trim_start_matches('.')
            .to_owned();
    }
    name
}

/// The asset's bytes as an attachment, with the headers every download carries.
/// `hold` lives as long as the body streams.
pub(crate) fn attachment(
    asset: &Asset,
    content: ObjectContent,
    hold: Hold,
) -> hyper::Response<DownloadBody> {
    let size = content.size();
    // A store failure midway ends the body early: with Content-Length set, the client
    // sees a truncated download, not a silently shorter file.
    let stream = content.into_stream().scan(hold, |_hold, chunk| {
        let frame = match chunk {
            Ok(bytes) => Some(Ok::<_, Infallible>(Frame::data(bytes))),
            Err(err) => {
                tracing::warn!(error = %err, "an asset stream failed midway");
                None
            }
        };
        futures_util::future::ready(frame)
    });
    let mut response = hyper::Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(&asset.content_type)
            .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream")),
    );
    headers.insert(CONTENT_LENGTH, HeaderValue::from(size));
    if let Ok(value) =
        HeaderValue::from_str(&format!("attachment; filename=\"{}\"", file_name(asset)))
    {
        headers.insert(CONTENT_DISPOSITION, value);
    }
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SANDBOX_CSP),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    headers.insert(
        http::header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Opens the asset's bytes for a download held by `hold_key`.
async fn send(
    app: &App,
    assets: &Assets,
    asset: &Asset,
    hold_key: &str,
) -> Result<hyper::Response<DownloadBody>, Refused> {
    let hold = app
        .state
        .holds
        .enter(hold_key)
        .map_err(|refused| Refused::Busy(refused.to_string()))?;
    let content = assets.sink.open(&asset.storage_key).await.map_err(|err| {
        tracing::error!(error = %err, asset = asset.id, "could not open an asset's bytes");
        Refused::NotFound
    })?;
    Ok(attachment(asset, content, hold))
}

/// The asset's row, if it still exists and still belongs to `owner`.
async fn live_asset(assets: &Assets, id: &str, owner: &str) -> Result<Asset, Refused> {
    match assets.store.get(id).await {
        Ok(Some(asset)) if asset.owner == owner => Ok(asset),
        Ok(_) => Err(Refused::NotFound),
        Err(err) => {
            tracing::error!(error = %err, "could not read an asset row");
            Err(Refused::Unavailable)
        }
    }
}

fn spend(assets: &Assets, peer: Option<IpAddr>) -> Result<(), Refused> {
    assets
        .links
        .spend_open(peer)
        .map_err(|limited| Refused::TooMany(limited.retry_after))
}

/// `GET /assets/{id}/content?expires=…&kid=…&sig=…`: a signed link, opened by
/// whoever holds it, with no header, until it expires or its asset is deleted.
pub(crate) async fn open_signed(
    app: &App,
    id: &str,
    query: &str,
    peer: Option<IpAddr>,
) -> Result<hyper::Response<DownloadBody>, Refused> {
    let assets = app.state.assets.as_ref().ok_or(Refused::NotFound)?;
    spend(assets, peer)?;
    let verified = assets
        .links
        .verify(id, query, crate::links::unix_now())
        .await
        .map_err(|err| {
            tracing::error!(error = %err, "could not read the link keys");
            Refused::Unavailable
        })?;
    match verified {
        Ok(_) => {}
        Err(LinkError::Expired) => return Err(Refused::Expired),
        Err(reason) => {
            tracing::info!(?reason, "refused a download link");
            return Err(Refused::NotFound);
        }
    }
    // The link was signed for the asset's owner; a deleted asset opens no more.
    let asset = match assets.store.get(id).await {
        Ok(Some(asset)) => asset,
        Ok(None) => return Err(Refused::NotFound),
        Err(err) => {
            tracing::error!(error = %err, "could not read an asset row");
            return Err(Refused::Unavailable);
        }
    };
    // Held by the address that opens it, not by the owner: a forwarded link
    // opened from many places must not use up the owner's own share of the server.
    send(app, assets, &asset, &opener_key(peer)).await
}

/// What an opener who is nobody in particular holds the server's connections
/// as: their address.
fn opener_key(peer: Option<IpAddr>) -> String {
    format!(
        "link-opener:{}",
        peer.map_or_else(|| "unknown".to_owned(), |peer| peer.to_string())
    )
}

/// `GET /shares/{id}`: a share, opened by its audience while it is live and its
/// asset still exists and is still its maker's. Counted and audited.
pub(crate) async fn open_share(
    app: &App,
    headers: &HeaderMap,
    share_id: &str,
    peer: Option<IpAddr>,
) -> Result<hyper::Response<DownloadBody>, Refused> {
    open_share_by(app, Opening::Credentials(headers), share_id, peer).await
}

/// Who opens a share: whoever the request's credentials name, or a person
/// the caller already knows (the portal's session).
pub(crate) enum Opening<'a> {
    /// The request's credentials say who (`opener::who_is_opening`).
    Credentials(&'a HeaderMap),
    /// Already known.
    Known(Opener),
}

/// A share opened by `opening` (see [`open_share`]).
pub(crate) async fn open_share_by(
    app: &App,
    opening: Opening<'_>,
    share_id: &str,
    peer: Option<IpAddr>,
) -> Result<hyper::Response<DownloadBody>, Refused> {
    let started = Instant::now();
    let assets = app.state.assets.as_ref().ok_or(Refused::NotFound)?;
    spend(assets, peer)?;
    if !crate::links::codec::is_asset_id(share_id) {
        return Err(Refused::NotFound);
    }
    let links = &assets.links;
    let share = match links.store.share(share_id).await {
        Ok(Some(share)) if share.is_live(OffsetDateTime::now_utc()) => share,
        Ok(_) => return Err(Refused::NotFound),
        Err(err) => {
            tracing::error!(error = %err, "could not read a share");
            return Err(Refused::Unavailable);
        }
    };
    let opener = match opening {
        Opening::Credentials(headers) => {
            who_is_opening(app, headers).await.map_err(Refused::Auth)?
        }
        Opening::Known(opener) => opener,
    };
    let subject = match (&share.audience, &opener) {
        (ShareAudience::Public, Opener::Nobody) => None,
        (_, Opener::Person(identity)) => Some(identity.subject.clone()),
        (_, Opener::Nobody) => return Err(Refused::Auth(AuthError::MissingCredentials)),
    };
    if let ShareAudience::People(people) = &share.audience
        && !subject
            .as_ref()
            .is_some_and(|subject| people.iter().any(|person| person == subject))
    {
        // Another person reads the share as one that does not exist.
        return Err(Refused::NotFound);
    }
    // A grant is checked against what its maker holds now: the asset must still
    // exist and still be theirs.
    let asset = live_asset(assets, &share.asset_id, &share.owner).await?;
    // Counted only while live, in one statement: a revoke committed first wins.
    let opened = match links
        .store
        .record_open(&share.id, OffsetDateTime::now_utc())
        .await
    {
        Ok(Some(opened)) => opened,
        Ok(None) => return Err(Refused::NotFound),
        Err(err) => {
            tracing::error!(error = %err, "could not count a share's open");
            return Err(Refused::Unavailable);
        }
    };
    let hold_key = subject.clone().unwrap_or_else(|| opener_key(peer));
    let response = send(app, assets, &asset, &hold_key).await?;
    audit_open(app, &opened, subject.as_deref(), peer, started.elapsed());
    Ok(response)
}

/// The audit row of one open of a share.
fn audit_open(
    app: &App,
    share: &docket_catalog::Share,
    subject: Option<&str>,
    peer: Option<IpAddr>,
    took: Duration,
) {
    let Some(writer) = &app.state.audit else {
        return;
    };
    writer.write(AuditEntry {
        tool: "share_asset.open".to_owned(),
        subject: subject.unwrap_or("anonymous").to_owned(),
        context: AuditContext {
            persona: None,
            connection: None,
            arguments: json!({
                "share_id": share.id,
                "asset_id": share.asset_id,
                "owner": share.owner,
                "audience": share.audience.kind(),
                "open_count": share.open_count,
                "peer": peer.map(|peer| peer.to_string()),
            }),
        },
        success: true,
        outcome: "completed".to_owned(),
        error_message: None,
        duration_ms: i64::try_from(took.as_millis()).unwrap_or(i64::MAX),
        call_id: Some(share.id.clone()),
        engine_user: None,
        upstream_ids: Vec::new(),
    });
}

impl App {
    /// What the maintenance pass does for links: rotates the link keys and
    /// deletes ended shares; how many shares it deleted.
    pub(crate) async fn maintain_links(&self) -> u64 {
        match &self.state.assets {
            Some(assets) => Arc::clone(&assets.links).maintain().await,
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset(name: &str, format: &str) -> Asset {
        crate::assets::sample_asset(name, format)
    }

    #[test]
    fn file_names_are_safe_for_the_header() {
        assert_eq!(file_name(&asset("orders", "csv")), "orders.csv");
        assert_eq!(file_name(&asset("orders.csv", "csv")), "orders.csv");
        assert_eq!(
            file_name(&asset("a\"b\r\nc/../d", "csv")),
            "a_b__c_.._d.csv"
        );
        assert_eq!(file_name(&asset("", "json")), "asset.json");
        assert_eq!(file_name(&asset("..", "")), "asset");
        assert_eq!(file_name(&asset("übersicht ✓", "csv")), "_bersicht__.csv");
        let long = file_name(&asset(&"x".repeat(500), "parquet"));
        assert_eq!(long.len(), MAX_FILE_NAME_CHARS);
        assert!(long.ends_with(".parquet"));
        proptest::proptest!(|(name in ".{0,300}", format in ".{0,20}")| {
            let name = file_name(&asset(&name, &format));
            proptest::prop_assert!(!name.is_empty() && name.len() <= MAX_FILE_NAME_CHARS);
            proptest::prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
            let header = format!("attachment; filename=\"{name}\"");
            proptest::prop_assert!(HeaderValue::from_str(&header).is_ok());
        });
    }
}
