//! `POST /oauth/register`: dynamic client registration (RFC 7591).
//!
//! The body is at most [`MAX_BODY_BYTES`] of JSON. `application_type` says
//! what the redirect URIs may be: `web` → https URIs matching one of the
//! operator's patterns; `native` → loopback `http://127.0.0.1`, `[::1]` or
//! `localhost` (any port when used) or a private-use scheme. A request
//! without `application_type` is `native` when every redirect URI is a native
//! one and `web` otherwise (RFC 7591 says `web`; inferring lets today's
//! desktop clients, which do not send it, register loopback URIs without
//! weakening either rule). At most [`MAX_REDIRECT_URIS`] URIs of at most
//! 2000 bytes; the client id comes from the OS RNG; the store's cap
//! (`registration.max_clients`) bounds the table, and unused registrations
//! are reaped by [`crate::AuthorizationServer::maintain`].

use std::net::IpAddr;

use http::StatusCode;
use serde_json::{Value, json};

use crate::cimd::{only_code_responses, read_client_name};
use crate::clients::{Client, ClientAuth, ClientKind};
use crate::config::{GrantType, RegistrationConfig};
use crate::events::{Event, EventKind};
use crate::redirect::{MAX_REDIRECT_URIS, check_native, check_web, matches_pattern};
use crate::reply::{Reply, json as json_reply, oauth_error};
use crate::state::{State, unavailable};
use crate::store::{ClientRecord, StoreError};
use crate::tokens::{hash, new_secret, random_text};

/// The most bytes of a registration request.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A registration refused with an RFC 7591 §3.2.2 error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {description}")]
pub struct RegistrationError {
    /// `invalid_redirect_uri` or `invalid_client_metadata`.
    pub code: &'static str,
    /// Why, for the client's developer.
    pub description: String,
}

fn bad_metadata(description: impl Into<String>) -> RegistrationError {
    RegistrationError {
        code: "invalid_client_metadata",
        description: description.into(),
    }
}

fn bad_redirect(description: impl Into<String>) -> RegistrationError {
    RegistrationError {
        code: "invalid_redirect_uri",
        description: description.into(),
    }
}

/// The metadata of an accepted registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientMetadata {
    /// The redirect URIs.
    pub redirect_uris: Vec<String>,
    /// `native` (true) or `web`.
    pub native: bool,
    /// `client_name`.
    pub client_name: Option<String>,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    pub token_endpoint_auth_method: String,
    /// `authorization_code`, and `refresh_token` unless left out.
    pub grant_types: Vec<GrantType>,
}

/// Reads and checks a registration request's body.
///
/// # Errors
/// A [`RegistrationError`] naming the first rule broken.
pub fn parse_metadata(
    body: &[u8],
    config: &RegistrationConfig,
) -> Result<ClientMetadata, RegistrationError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(bad_metadata(format!(
            "a registration is at most {MAX_BODY_BYTES} bytes"
        )));
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|_| bad_metadata("the body is not JSON"))?;
    let Value::Object(metadata) = value else {
        return Err(bad_metadata("the body is not a JSON object"));
    };
    let Some(Value::Array(uris)) = metadata.get("redirect_uris") else {
        return Err(bad_redirect("redirect_uris is required (an array of URIs)"));
    };
    if uris.is_empty() || uris.len() > MAX_REDIRECT_URIS {
        return Err(bad_redirect(format!(
            "redirect_uris has 1 to {MAX_REDIRECT_URIS} URIs"
        )));
    }
    let mut redirect_uris = Vec::with_capacity(uris.len());
    for uri in uris {
        let Some(uri) = uri.as_str() else {
            return Err(bad_redirect("redirect_uris are strings"));
        };
        if redirect_uris.iter().any(|seen| seen == uri) {
            return Err(bad_redirect("a redirect URI is listed twice"));
        }
        redirect_uris.push(uri.to_owned());
    }
    let native = match metadata.get("application_type") {
        Some(Value::String(kind)) if kind == "native" => true,
        Some(Value::String(kind)) if kind == "web" => false,
        None | Some(Value::Null) => redirect_uris.iter().all(|uri| check_native(uri).is_ok()),
        Some(_) => return Err(bad_metadata("application_type is web or native")),
    };
    for uri in &redirect_uris {
        if native {
            check_native(uri).map_err(bad_redirect)?;
        } else {
            check_web(uri).map_err(bad_redirect)?;
            if !config
                .redirect_uris
                .iter()
                .any(|pattern| matches_pattern(pattern, uri))
            {
                return Err(bad_redirect(format!(
                    "{uri} is not among the redirect URIs this server accepts for web clients"
                )));
            }
        }
    }
    let token_endpoint_auth_method = match metadata.get("token_endpoint_auth_method") {
        None | Some(Value::Null) => "none".to_owned(),
        Some(Value::String(method))
            if matches!(
                method.as_str(),
                "none" | "client_secret_basic" | "client_secret_post"
            ) =>
        {
            method.clone()
        }
        Some(_) => {
            return Err(bad_metadata(
                "token_endpoint_auth_method is none, client_secret_basic or client_secret_post",
            ));
        }
    };
    let grant_types = match metadata.get("grant_types") {
        None | Some(Value::Null) => vec![GrantType::AuthorizationCode, GrantType::RefreshToken],
        Some(Value::Array(grants)) => {
            let mut parsed = Vec::new();
            for grant in grants {
                match grant.as_str() {
                    Some("authorization_code") => parsed.push(GrantType::AuthorizationCode),
                    Some("refresh_token") => parsed.push(GrantType::RefreshToken),
                    _ => {
                        return Err(bad_metadata(
                            "grant_types may be authorization_code and refresh_token",
                        ));
                    }
                }
            }
            if !parsed.contains(&GrantType::AuthorizationCode) {
                return Err(bad_metadata("grant_types must include authorization_code"));
            }
            parsed.sort();
            parsed.dedup();
            parsed
        }
        Some(_) => return Err(bad_metadata("grant_types is an array")),
    };
    if !only_code_responses(metadata.get("response_types")) {
        return Err(bad_metadata("response_types may only be code"));
    }
    let client_name = read_client_name(metadata.get("client_name")).map_err(bad_metadata)?;
    Ok(ClientMetadata {
        redirect_uris,
        native,
        client_name,
        token_endpoint_auth_method,
        grant_types,
    })
}

pub(crate) async fn handle(state: &State, body: &[u8], peer: IpAddr) -> Reply {
    let refused = |error: &RegistrationError| {
        state.record(Event::new(EventKind::Registered, peer).refused(error.to_string()));
        oauth_error(StatusCode::BAD_REQUEST, error.code, &error.description)
    };
    if !state.config.registration.enabled {
        return oauth_error(
            StatusCode::FORBIDDEN,
            "access_denied",
            "dynamic client registration is turned off on this server",
        );
    }
    let metadata = match parse_metadata(body, &state.config.registration) {
        Ok(metadata) => metadata,
        Err(error) => return refused(&error),
    };
    let Ok(client_id) = random_text(24) else {
        return unavailable(&"no randomness");
    };
    let secret = if metadata.token_endpoint_auth_method == "none" {
        None
    } else {
        match new_secret() {
            Ok(secret) => Some(secret),
            Err(error) => return unavailable(&error),
        }
    };
    let client = Client {
        client_id: client_id.clone(),
        kind: ClientKind::Registered,
        name: metadata.client_name.clone(),
        redirect_uris: metadata.redirect_uris.clone(),
        native: metadata.native,
        auth: secret
            .as_deref()
            .map_or(ClientAuth::None, |secret| ClientAuth::Secret(hash(secret))),
        grant_types: metadata.grant_types.clone(),
        roles: Vec::new(),
    };
    let now = State::now();
    let record = ClientRecord {
        client_id: client_id.clone(),
        metadata: client.record_metadata(&metadata.token_endpoint_auth_method),
        secret_hash: secret.as_deref().map(hash),
        registered_at: now,
        last_used_at: None,
    };
    match state
        .store
        .register_client(&record, state.config.registration.max_clients)
        .await
    {
        Ok(()) => {}
        Err(StoreError::Full(_)) => {
            state.record(
                Event::new(EventKind::Registered, peer).refused("the registration cap is reached"),
            );
            return oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "this server holds as many registered clients as it allows; try again later",
            );
        }
        Err(StoreError::Invalid(why)) => return refused(&bad_metadata(why)),
        Err(error) => return unavailable(&error),
    }
    state.record(Event::new(EventKind::Registered, peer).client(&client_id));
    let grants: Vec<&str> = metadata
        .grant_types
        .iter()
        .map(|grant| grant.as_str())
        .collect();
    let mut answer = json!({
        "client_id": client_id,
        "client_id_issued_at": now.unix_timestamp(),
        "redirect_uris": metadata.redirect_uris,
        "application_type": if metadata.native { "native" } else { "web" },
        "grant_types": grants,
        "response_types": ["code"],
        "token_endpoint_auth_method": metadata.token_endpoint_auth_method,
    });
    if let Value::Object(map) = &mut answer {
        if let Some(name) = &metadata.client_name {
            map.insert("client_name".into(), name.clone().into());
        }
        if let Some(secret) = secret {
            map.insert("client_secret".into(), secret.into());
            map.insert("client_secret_expires_at".into(), 0.into());
        }
    }
    json_reply(StatusCode::CREATED, &answer)
}
