//! The `auth.oauth_server` configuration section: the team's provider, the
//! lifetimes of codes, tokens and keys, who may register, and the limits.
//!
//! Its smallest form names the provider:
//! `{ upstream: { issuer, client_id, client_secret } }`; every other key has a
//! default, documented on its field.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// Why [`crate::AuthorizationServer::new`] refused its configuration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration has problems, each prefixed by its key.
    #[error("the authorization server's configuration is invalid: {}", .0.join("; "))]
    Invalid(Vec<String>),
    /// The site (issuer, resource) is not usable.
    #[error("the authorization server's site is invalid: {0}")]
    Site(String),
    /// An HTTP client could not be built (for example an unreadable `ca_file`).
    #[error("the authorization server's HTTP client cannot be built: {0}")]
    Http(String),
}

/// Where Docket is: the issuer it names itself by and the one resource its
/// tokens are for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Docket's public base URL, without a trailing slash
    /// (`https://docket.example.com`).
    pub issuer: String,
    /// `{issuer}/mcp`: the only resource (RFC 8707), every token's audience.
    pub resource: String,
}

impl Site {
    /// The site of a Docket at `issuer` (a trailing slash is dropped), whose
    /// resource is `{issuer}/mcp`.
    #[must_use]
    pub fn at(issuer: &str) -> Self {
        let issuer = issuer.trim_end_matches('/').to_owned();
        Self {
            resource: format!("{issuer}/mcp"),
            issuer,
        }
    }

    /// Checks the site: an https issuer (http for a loopback host) without a
    /// trailing slash, query or fragment, and an absolute resource URL.
    ///
    /// # Errors
    /// [`ConfigError::Site`].
    pub fn check(&self) -> Result<(), ConfigError> {
        check_provider_url(&self.issuer)
            .map_err(|why| ConfigError::Site(format!("issuer {}: {why}", self.issuer)))?;
        if self.issuer.ends_with('/') {
            return Err(ConfigError::Site(format!(
                "issuer {}: must not end with a slash",
                self.issuer
            )));
        }
        check_provider_url(&self.resource)
            .map_err(|why| ConfigError::Site(format!("resource {}: {why}", self.resource)))?;
        Ok(())
    }

    /// Whether the issuer is plain http on a loopback host (cookies then go
    /// without `Secure`, which such a browser would not send back).
    #[must_use]
    pub fn is_http_loopback(&self) -> bool {
        reqwest::Url::parse(&self.issuer)
            .is_ok_and(|url| url.scheme() == "http" && url.host_str().is_some_and(is_loopback_host))
    }
}

/// The `auth.oauth_server` section.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthServerConfig {
    /// The team's OpenID provider, to which logins are brokered.
    pub upstream: UpstreamConfig,
    /// Where the roles are in the provider's claims (and in a
    /// `client_credentials` token), a dot path as `auth.oidc.role_claim`.
    /// Default `roles`.
    pub role_claim: String,
    /// The scopes a client may ask for; a request without `scope` gets all of
    /// them. Default `[mcp]`. (`offline_access` is accepted and ignored: a
    /// login always comes with a refresh token.)
    pub scopes: Vec<String>,
    /// How long an access token lives, in seconds. Default 600.
    pub access_token_ttl: u64,
    /// How long a refresh-token family lives from its login, whatever its
    /// refreshes, in seconds. Default 30 days.
    pub refresh_token_ttl: u64,
    /// How long an authorization code lives, in seconds. Default 60.
    pub code_ttl: u64,
    /// How long an authorization in flight (the provider's login, the consent
    /// page) lives, in seconds. Default 600.
    pub login_ttl: u64,
    /// How often a new signing key is made, in seconds. Default 7 days. Old keys
    /// stay published until every token they signed has expired.
    pub signing_key_rotation: u64,
    /// Dynamic client registration (RFC 7591).
    pub registration: RegistrationConfig,
    /// Clients named by a metadata document URL.
    pub client_metadata_documents: MetadataDocumentConfig,
    /// Confidential clients the operator registers.
    pub clients: Vec<ConfiguredClient>,
    /// Requests per minute per IP address.
    pub rate_limits: RateLimits,
    /// How many refresh-token families one subject may hold; signing in once
    /// more revokes the oldest. Default 50.
    pub families_per_subject: u32,
    /// How many authorizations may be in flight (and codes unredeemed) at once,
    /// over all replicas. Default 10000.
    pub max_pending: u64,
}

impl Default for OAuthServerConfig {
    fn default() -> Self {
        Self {
            upstream: UpstreamConfig::default(),
            role_claim: "roles".to_owned(),
            scopes: vec!["mcp".to_owned()],
            access_token_ttl: 600,
            refresh_token_ttl: 30 * 86_400,
            code_ttl: 60,
            login_ttl: 600,
            signing_key_rotation: 7 * 86_400,
            registration: RegistrationConfig::default(),
            client_metadata_documents: MetadataDocumentConfig::default(),
            clients: Vec::new(),
            rate_limits: RateLimits::default(),
            families_per_subject: 50,
            max_pending: 10_000,
        }
    }
}

/// The team's OpenID provider, with Docket as its confidential client.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The provider's issuer; its discovery document is at
    /// `{issuer}/.well-known/openid-configuration`. `https://`, or `http://`
    /// for a loopback host.
    pub issuer: String,
    /// Docket's client id at the provider; ID tokens must be for it.
    pub client_id: String,
    /// Docket's client secret at the provider (sent as `client_secret_basic`).
    pub client_secret: String,
    /// The scopes Docket asks the provider for. Default
    /// `[openid, email, profile]`. With `offline_access` Docket keeps the
    /// provider's refresh token (sealed inside its own) and checks every
    /// refresh at the provider, so a person it no longer accepts stops
    /// refreshing; it then asks with `prompt=consent`, as OpenID Connect
    /// requires for offline access.
    pub scopes: Vec<String>,
    /// The provider's claims that access tokens carry. Default `sub`, `email`,
    /// `email_verified`, `name`, `preferred_username`; the role claim's top key
    /// is always carried too.
    pub claims: Vec<String>,
    /// A hang guard for each request to the provider, in seconds. Default 10.
    pub timeout: u64,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            client_id: String::new(),
            client_secret: String::new(),
            scopes: ["openid", "email", "profile"].map(str::to_owned).to_vec(),
            claims: [
                "sub",
                "email",
                "email_verified",
                "name",
                "preferred_username",
            ]
            .map(str::to_owned)
            .to_vec(),
            timeout: 10,
        }
    }
}

impl fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("scopes", &self.scopes)
            .field("claims", &self.claims)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Dynamic client registration (RFC 7591, `POST /oauth/register`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistrationConfig {
    /// Whether clients may register. Default true.
    pub enabled: bool,
    /// The https redirect URIs a `web` client may register, as patterns: `*`
    /// matches within one host label or one path segment
    /// (`https://*.example.com/callback`). Default none: only `native`
    /// clients (loopback and private-use schemes) may register.
    pub redirect_uris: Vec<String>,
    /// A client that has not completed a step this long after registering is
    /// removed, in seconds. Default 1 day.
    pub unused_after: u64,
    /// A client idle this long is removed, in seconds. Default 90 days.
    pub idle_after: u64,
    /// The most clients registered at once. Default 10000.
    pub max_clients: u64,
}

impl Default for RegistrationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            redirect_uris: Vec::new(),
            unused_after: 86_400,
            idle_after: 90 * 86_400,
            max_clients: 10_000,
        }
    }
}

/// Client ID Metadata Documents: a client whose `client_id` is an https URL.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetadataDocumentConfig {
    /// Whether such clients are accepted. Default true.
    pub enabled: bool,
    /// Hosts exempt from the private-address guard (on-premises clients,
    /// tests). Default none.
    pub allowed_hosts: Vec<String>,
    /// An extra PEM root certificate for the documents' https fetches.
    pub ca_file: Option<PathBuf>,
    /// The most bytes of a document. Default 65536.
    pub max_bytes: usize,
    /// A hang guard for one fetch, in seconds. Default 5.
    pub timeout: u64,
}

impl Default for MetadataDocumentConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allowed_hosts: Vec::new(),
            ca_file: None,
            max_bytes: 65_536,
            timeout: 5,
        }
    }
}

/// A confidential client the operator registers.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfiguredClient {
    /// Its id.
    pub client_id: String,
    /// The SHA-256 of its secret, in hex (`printf %s SECRET | sha256sum`).
    pub client_secret_sha256: String,
    /// Its redirect URIs (for `authorization_code`), compared exactly.
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    /// The grants it may use. Default `[client_credentials]`.
    #[serde(default = "default_configured_grants")]
    pub grant_types: Vec<GrantType>,
    /// The roles its `client_credentials` tokens carry at the role claim.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Its name on the consent page. Default its id.
    #[serde(default)]
    pub name: Option<String>,
}

fn default_configured_grants() -> Vec<GrantType> {
    vec![GrantType::ClientCredentials]
}

/// An OAuth grant type a client may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantType {
    /// `authorization_code`.
    AuthorizationCode,
    /// `refresh_token`.
    RefreshToken,
    /// `client_credentials`.
    ClientCredentials,
}

impl GrantType {
    /// The grant's name on the wire.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthorizationCode => "authorization_code",
            Self::RefreshToken => "refresh_token",
            Self::ClientCredentials => "client_credentials",
        }
    }

    /// The grant named `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "authorization_code" => Some(Self::AuthorizationCode),
            "refresh_token" => Some(Self::RefreshToken),
            "client_credentials" => Some(Self::ClientCredentials),
            _ => None,
        }
    }
}

/// Requests per minute per IP address, per endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimits {
    /// `POST /oauth/register`. Default 10.
    pub register: u32,
    /// `GET /oauth/authorize` (and the callback and consent steps). Default 60.
    pub authorize: u32,
    /// `POST /oauth/token` and `/oauth/revoke`. Default 120.
    pub token: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            register: 10,
            authorize: 60,
            token: 120,
        }
    }
}

impl OAuthServerConfig {
    /// Every problem in this section, each prefixed by `path` (normally
    /// `auth.oauth_server`).
    #[must_use]
    pub fn problems(&self, path: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let upstream = &self.upstream;
        if upstream.issuer.trim().is_empty() {
            problems.push(format!("{path}.upstream.issuer: must be set"));
        } else if let Err(why) = check_provider_url(&upstream.issuer) {
            problems.push(format!("{path}.upstream.issuer: {why}"));
        }
        if upstream.client_id.trim().is_empty() {
            problems.push(format!("{path}.upstream.client_id: must be set"));
        }
        if upstream.client_secret.is_empty() {
            problems.push(format!("{path}.upstream.client_secret: must be set"));
        }
        if !upstream.scopes.iter().any(|scope| scope == "openid") {
            problems.push(format!(
                "{path}.upstream.scopes: must include openid, or the provider sends no ID token"
            ));
        }
        if !upstream.claims.iter().any(|claim| claim == "sub") {
            problems.push(format!(
                "{path}.upstream.claims: must include sub, the person's identity"
            ));
        }
        if upstream.timeout == 0 || upstream.timeout > 300 {
            problems.push(format!("{path}.upstream.timeout: must be 1 to 300 seconds"));
        }
        if self.role_claim.split('.').any(str::is_empty) {
            problems.push(format!(
                "{path}.role_claim: must be a claim name or a dot path such as realm_access.roles"
            ));
        }
        if self.scopes.is_empty() {
            problems.push(format!("{path}.scopes: must name at least one scope"));
        }
        for (index, scope) in self.scopes.iter().enumerate() {
            if scope.is_empty() || scope.len() > 64 || !scope.bytes().all(is_scope_byte) {
                problems.push(format!(
                    "{path}.scopes[{index}]: a scope is 1 to 64 printable characters without spaces, quotes or backslashes"
                ));
            }
        }
        let seconds = [
            ("access_token_ttl", self.access_token_ttl, 60, 86_400),
            (
                "refresh_token_ttl",
                self.refresh_token_ttl,
                60,
                366 * 86_400,
            ),
            ("code_ttl", self.code_ttl, 10, 600),
            ("login_ttl", self.login_ttl, 60, 3_600),
            (
                "signing_key_rotation",
                self.signing_key_rotation,
                3_600,
                366 * 86_400,
            ),
            (
                "registration.unused_after",
                self.registration.unused_after,
                60,
                366 * 86_400,
            ),
            (
                "registration.idle_after",
                self.registration.idle_after,
                60,
                3_660 * 86_400,
            ),
            (
                "client_metadata_documents.timeout",
                self.client_metadata_documents.timeout,
                1,
                60,
            ),
        ];
        for (key, value, least, most) in seconds {
            if value < least || value > most {
                problems.push(format!(
                    "{path}.{key}: must be {least} to {most} seconds, not {value}"
                ));
            }
        }
        if self.registration.max_clients == 0 {
            problems.push(format!(
                "{path}.registration.max_clients: must be at least 1 (set registration.enabled: false to turn registration off)"
            ));
        }
        for (index, pattern) in self.registration.redirect_uris.iter().enumerate() {
            if let Err(why) = crate::redirect::check_pattern(pattern) {
                problems.push(format!("{path}.registration.redirect_uris[{index}]: {why}"));
            }
        }
        let documents = &self.client_metadata_documents;
        if documents.max_bytes < 1024 || documents.max_bytes > 1024 * 1024 {
            problems.push(format!(
                "{path}.client_metadata_documents.max_bytes: must be 1024 to 1048576"
            ));
        }
        for (index, host) in documents.allowed_hosts.iter().enumerate() {
            if host.is_empty()
                || (host.contains(['/', ':', ' ']) && host.parse::<IpAddr>().is_err())
            {
                problems.push(format!(
                    "{path}.client_metadata_documents.allowed_hosts[{index}]: must be a host name or an IP address, without a scheme or a port"
                ));
            }
        }
        if self.families_per_subject == 0 {
            problems.push(format!("{path}.families_per_subject: must be at least 1"));
        }
        if self.max_pending == 0 {
            problems.push(format!("{path}.max_pending: must be at least 1"));
        }
        let limits = [
            ("register", self.rate_limits.register),
            ("authorize", self.rate_limits.authorize),
            ("token", self.rate_limits.token),
        ];
        for (key, value) in limits {
            if value == 0 {
                problems.push(format!(
                    "{path}.rate_limits.{key}: must be at least 1 request per minute"
                ));
            }
        }
        let mut seen = BTreeSet::new();
        for (index, client) in self.clients.iter().enumerate() {
            let item = format!("{path}.clients[{index}]");
            if client.client_id.is_empty() || client.client_id.len() > 256 {
                problems.push(format!("{item}.client_id: must be 1 to 256 bytes"));
            } else if client.client_id.starts_with("https://") {
                problems.push(format!(
                    "{item}.client_id: must not be an https URL (those name metadata documents)"
                ));
            } else if !seen.insert(client.client_id.as_str()) {
                problems.push(format!(
                    "{item}.client_id: {} is configured twice",
                    client.client_id
                ));
            }
            let hash = &client.client_secret_sha256;
            if hash.len() != 64 || !hash.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                problems.push(format!(
                    "{item}.client_secret_sha256: must be 64 hex digits (the SHA-256 of the secret)"
                ));
            }
            if client.grant_types.is_empty() {
                problems.push(format!("{item}.grant_types: must name at least one grant"));
            }
            let code = client.grant_types.contains(&GrantType::AuthorizationCode);
            if code && client.redirect_uris.is_empty() {
                problems.push(format!(
                    "{item}.redirect_uris: authorization_code needs at least one redirect URI"
                ));
            }
            for (uri_index, uri) in client.redirect_uris.iter().enumerate() {
                if let Err(why) = crate::redirect::check_configured(uri) {
                    problems.push(format!("{item}.redirect_uris[{uri_index}]: {why}"));
                }
            }
        }
        problems
    }
}

/// Whether `byte` may appear in a scope token (RFC 6749 §3.3).
pub(crate) fn is_scope_byte(byte: u8) -> bool {
    byte == 0x21 || (0x23..=0x5B).contains(&byte) || (0x5D..=0x7E).contains(&byte)
}

/// Why `url` cannot be an OpenID provider's issuer (or a URL it publishes), if
/// it cannot: an absolute `https://` URL, or `http://` for a loopback host,
/// without a query or fragment. `docket_server`'s `auth.oidc` checks by it too.
pub fn check_provider_url(url: &str) -> Result<(), &'static str> {
    let parsed = reqwest::Url::parse(url).map_err(|_| "must be an absolute URL")?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("must not have a query or a fragment");
    }
    let host = parsed.host_str().unwrap_or_default();
    match parsed.scheme() {
        "https" if !host.is_empty() => Ok(()),
        "http" if is_loopback_host(host) => Ok(()),
        _ => Err("must be an https:// URL (http:// is allowed only for a loopback host)"),
    }
}

/// Whether `host` (as `Url::host_str` gives it) names the local machine.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_form_names_the_provider() {
        let config: OAuthServerConfig = serde_json::from_value(serde_json::json!({
            "upstream": {"issuer": "https://login.example.com", "client_id": "docket",
                         "client_secret": "s3cret"}
        }))
        .expect("parses");
        assert!(config.problems("auth.oauth_server").is_empty());
        assert!(!format!("{config:?}").contains("s3cret"));
        let empty = OAuthServerConfig::default().problems("auth.oauth_server");
        assert!(
            empty
                .iter()
                .any(|problem| problem.starts_with("auth.oauth_server.upstream.issuer"))
        );
    }
}
