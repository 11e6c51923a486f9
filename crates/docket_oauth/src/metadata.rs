//! `GET /.well-known/oauth-authorization-server`: the authorization server
//! metadata (RFC 8414).

use serde_json::{Value, json};

use crate::config::{GrantType, OAuthServerConfig, Site};

/// The metadata document of the server at `site` with `config`.
#[must_use]
pub fn document(site: &Site, config: &OAuthServerConfig) -> Value {
    let issuer = &site.issuer;
    let mut grants = vec![
        GrantType::AuthorizationCode.as_str(),
        GrantType::RefreshToken.as_str(),
    ];
    if config
        .clients
        .iter()
        .any(|client| client.grant_types.contains(&GrantType::ClientCredentials))
    {
        grants.push(GrantType::ClientCredentials.as_str());
    }
    let mut document = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/oauth/authorize"),
        "token_endpoint": format!("{issuer}/oauth/token"),
        "revocation_endpoint": format!("{issuer}/oauth/revoke"),
        "jwks_uri": format!("{issuer}/oauth/jwks"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": grants,
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": config.client_metadata_documents.enabled,
        "scopes_supported": config.scopes,
    });
    if config.registration.enabled
        && let Value::Object(map) = &mut document
    {
        map.insert(
            "registration_endpoint".into(),
            format!("{issuer}/oauth/register").into(),
        );
    }
    document
}
