//! What the provider is started with: accounts, clients, resources and the token-exchange
//! policy. Serialized to the JSON that `testing/oidc-provider/provider.mjs` reads (its README
//! describes the same shape).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// The redirect URI a [`Client`] gets unless told otherwise. Nothing listens there: the
/// provider's test login reads the code from the redirect itself.
pub const DEFAULT_REDIRECT_URI: &str = "http://127.0.0.1/oidc-provider-test/callback";

/// How long an exchanged token lives unless [`ExchangePolicy::expires_in`] says otherwise,
/// in seconds.
pub const DEFAULT_EXCHANGE_EXPIRES_IN: u64 = 300;

/// How long a resource's access tokens live unless [`Resource::access_token_ttl`] says
/// otherwise, in seconds.
pub const DEFAULT_ACCESS_TOKEN_TTL: u64 = 3600;

/// Everything the provider knows: who can sign in, which clients exist, for which resources
/// access tokens are issued, and who may exchange tokens for what.
///
/// Built with [`ProviderConfig::new`] and the chained setters, or by filling the fields.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProviderConfig {
    /// Accounts by id (the `sub` of their tokens).
    pub accounts: BTreeMap<String, Account>,
    /// The registered clients.
    pub clients: Vec<Client>,
    /// Resources by resource indicator: the audience URL that access tokens for it carry as
    /// `aud`.
    pub resources: BTreeMap<String, Resource>,
    /// Which client may exchange tokens for which audience, and which accounts are refused.
    pub token_exchange: ExchangePolicy,
    /// The account a login signs in as when the authorization request names none with
    /// `login_hint` (for flows a test does not drive itself, such as an authorization server
    /// in front of this provider); `None`: such a login shows a form (`POST
    /// /interaction/<uid>/login` with `account=<id>`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_login: Option<String>,
}

impl ProviderConfig {
    /// An empty configuration: no accounts, clients or resources.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the account `id`.
    #[must_use]
    pub fn account(mut self, id: impl Into<String>, account: Account) -> Self {
        self.accounts.insert(id.into(), account);
        self
    }

    /// Adds a client (a second one with the same id is refused when the provider starts).
    #[must_use]
    pub fn client(mut self, client: Client) -> Self {
        self.clients.push(client);
        self
    }

    /// Adds (or replaces) the resource whose indicator (audience URL) is `indicator`.
    #[must_use]
    pub fn resource(mut self, indicator: impl Into<String>, resource: Resource) -> Self {
        self.resources.insert(indicator.into(), resource);
        self
    }

    /// Sets the token-exchange policy.
    #[must_use]
    pub fn token_exchange(mut self, policy: ExchangePolicy) -> Self {
        self.token_exchange = policy;
        self
    }

    /// Sets the account a login without `login_hint` signs in as.
    #[must_use]
    pub fn auto_login(mut self, account: impl Into<String>) -> Self {
        self.auto_login = Some(account.into());
        self
    }
}

/// An account: its claims, which the provider releases in ID tokens and at the userinfo
/// endpoint by scope, and copies into every access token issued for it (all of them, whatever
/// the scope; `iss`, `sub`, `aud`, `exp`, `iat`, `jti`, `client_id`, `scope` and `act` are the
/// token's own and are not copied).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Account {
    /// The claims, by name.
    pub claims: serde_json::Map<String, Value>,
}

impl Account {
    /// An account without claims (its tokens still carry `sub`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the claim `name` to `value`.
    #[must_use]
    pub fn claim(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.claims.insert(name.into(), value.into());
        self
    }

    /// Sets `email`, and `email_verified` to true.
    #[must_use]
    pub fn email(self, email: impl Into<String>) -> Self {
        self.claim("email", email.into())
            .claim("email_verified", true)
    }

    /// Sets `preferred_username`.
    #[must_use]
    pub fn preferred_username(self, username: impl Into<String>) -> Self {
        self.claim("preferred_username", username.into())
    }

    /// Sets `name`.
    #[must_use]
    pub fn name(self, name: impl Into<String>) -> Self {
        self.claim("name", name.into())
    }

    /// Sets `roles` to a list of strings.
    #[must_use]
    pub fn roles<I, S>(self, roles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let roles: Vec<Value> = roles
            .into_iter()
            .map(|role| Value::String(role.into()))
            .collect();
        self.claim("roles", roles)
    }
}

/// An OAuth grant type a client may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum GrantType {
    /// `authorization_code` (always with PKCE S256 here).
    #[serde(rename = "authorization_code")]
    AuthorizationCode,
    /// `client_credentials`.
    #[serde(rename = "client_credentials")]
    ClientCredentials,
    /// `refresh_token` (issued with the `offline_access` scope).
    #[serde(rename = "refresh_token")]
    RefreshToken,
    /// RFC 8693 token exchange, `urn:ietf:params:oauth:grant-type:token-exchange`.
    #[serde(rename = "urn:ietf:params:oauth:grant-type:token-exchange")]
    TokenExchange,
}

impl GrantType {
    /// The `grant_type` value on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuthorizationCode => "authorization_code",
            Self::ClientCredentials => "client_credentials",
            Self::RefreshToken => "refresh_token",
            Self::TokenExchange => crate::TOKEN_EXCHANGE_GRANT,
        }
    }
}

/// How a client authenticates at the token endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuthMethod {
    /// HTTP Basic with the form-encoded id and secret (RFC 6749 §2.3.1).
    #[default]
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form body.
    ClientSecretPost,
}

/// A confidential client.
///
/// `Debug` leaves the secret out.
#[derive(Clone, Serialize)]
pub struct Client {
    /// Its `client_id`.
    pub client_id: String,
    /// Its `client_secret`.
    pub client_secret: String,
    /// The grant types it may use.
    pub grant_types: Vec<GrantType>,
    /// Its registered redirect URIs (used only with [`GrantType::AuthorizationCode`]).
    pub redirect_uris: Vec<String>,
    /// How it authenticates at the token endpoint.
    pub token_endpoint_auth_method: ClientAuthMethod,
}

impl Client {
    /// A client that may use the authorization code, client credentials and token-exchange
    /// grants (whether an exchange is allowed is up to the [`ExchangePolicy`]), with
    /// [`DEFAULT_REDIRECT_URI`] and `client_secret_basic`.
    pub fn new(client_id: impl Into<String>, client_secret: impl Into<String>) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            grant_types: vec![
                GrantType::AuthorizationCode,
                GrantType::ClientCredentials,
                GrantType::TokenExchange,
            ],
            redirect_uris: vec![DEFAULT_REDIRECT_URI.to_owned()],
            token_endpoint_auth_method: ClientAuthMethod::ClientSecretBasic,
        }
    }

    /// Replaces the grant types.
    #[must_use]
    pub fn grant_types(mut self, grant_types: impl IntoIterator<Item = GrantType>) -> Self {
        self.grant_types = grant_types.into_iter().collect();
        self
    }

    /// Replaces the redirect URIs.
    #[must_use]
    pub fn redirect_uris<I, S>(mut self, uris: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.redirect_uris = uris.into_iter().map(Into::into).collect();
        self
    }

    /// Sets how it authenticates at the token endpoint.
    #[must_use]
    pub fn auth_method(mut self, method: ClientAuthMethod) -> Self {
        self.token_endpoint_auth_method = method;
        self
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("grant_types", &self.grant_types)
            .field("redirect_uris", &self.redirect_uris)
            .field(
                "token_endpoint_auth_method",
                &self.token_endpoint_auth_method,
            )
            .finish()
    }
}

/// A resource (an API) access tokens are issued for, as RS256 JWTs whose `aud` is its
/// indicator.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resource {
    /// The scopes it offers; a requested scope outside them is dropped from (or, in a token
    /// exchange, refuses) the token.
    pub scopes: Vec<String>,
    /// How long its access tokens live, in seconds ([`DEFAULT_ACCESS_TOKEN_TTL`] when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_token_ttl: Option<u64>,
}

impl Resource {
    /// A resource without scopes and with the default token lifetime.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the scopes it offers.
    #[must_use]
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Sets how long its access tokens live, in seconds.
    #[must_use]
    pub fn access_token_ttl(mut self, seconds: u64) -> Self {
        self.access_token_ttl = Some(seconds);
        self
    }
}

/// The token-exchange policy.
///
/// A client missing from [`allowed`](Self::allowed) is refused with `unauthorized_client`;
/// an audience that is not among its own, or is no [`Resource`], with `invalid_target`; a
/// subject among [`refused_accounts`](Self::refused_accounts) with `invalid_grant`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExchangePolicy {
    /// For each client id, the audiences (resource indicators) it may exchange tokens for.
    pub allowed: BTreeMap<String, Vec<String>>,
    /// Accounts whose tokens are never exchanged.
    pub refused_accounts: Vec<String>,
    /// How long exchanged tokens live, in seconds ([`DEFAULT_EXCHANGE_EXPIRES_IN`] when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<u64>,
}

impl ExchangePolicy {
    /// A policy that allows nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets `client_id` exchange tokens for `audience`.
    #[must_use]
    pub fn allow(mut self, client_id: impl Into<String>, audience: impl Into<String>) -> Self {
        self.allowed
            .entry(client_id.into())
            .or_default()
            .push(audience.into());
        self
    }

    /// Refuses every exchange of `account`'s tokens.
    #[must_use]
    pub fn refuse_account(mut self, account: impl Into<String>) -> Self {
        self.refused_accounts.push(account.into());
        self
    }

    /// Sets how long exchanged tokens live, in seconds.
    #[must_use]
    pub fn expires_in(mut self, seconds: u64) -> Self {
        self.expires_in = Some(seconds);
        self
    }
}
