//! The three kinds of client and how one is found by its `client_id`:
//!
//! - an https URL names a **metadata document** (public, fetched and cached,
//!   [`crate::cimd`]);
//! - an id the configuration lists is a **configured** confidential client
//!   (its secret checked by hash, in constant time);
//! - anything else is looked up among the clients that **registered**
//!   (RFC 7591, [`crate::register`]).

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::cimd::{DocumentError, DocumentFetcher};
use crate::config::{ConfiguredClient, GrantType};
use crate::redirect::redirect_matches;
use crate::store::{ClientRecord, OAuthStore, StoreError};
use crate::tokens::{hash, same_secret};

/// Where a client's registration comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// A Client ID Metadata Document.
    Document,
    /// Dynamic client registration.
    Registered,
    /// The operator's configuration.
    Configured,
}

/// How a client authenticates at the token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// A public client: no secret.
    None,
    /// A confidential client: the SHA-256 (hex) of its secret, sent with
    /// `client_secret_basic` or `client_secret_post`.
    Secret(String),
}

/// A client, whatever its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    /// Its id.
    pub client_id: String,
    /// Its kind.
    pub kind: ClientKind,
    /// Its name, when it gave one.
    pub name: Option<String>,
    /// Its redirect URIs.
    pub redirect_uris: Vec<String>,
    /// A native application (loopback redirects match on any port).
    pub native: bool,
    /// How it authenticates.
    pub auth: ClientAuth,
    /// The grants it may use.
    pub grant_types: Vec<GrantType>,
    /// The roles of its `client_credentials` tokens (configured clients).
    pub roles: Vec<String>,
}

impl Client {
    /// Whether `uri` is one of its redirect URIs.
    #[must_use]
    pub fn allows_redirect(&self, uri: &str) -> bool {
        self.redirect_uris
            .iter()
            .any(|registered| redirect_matches(registered, uri, self.native))
    }

    /// Whether it may use `grant`.
    #[must_use]
    pub fn allows_grant(&self, grant: GrantType) -> bool {
        self.grant_types.contains(&grant)
    }

    /// Whether `secret` is its secret (always false for a public client).
    #[must_use]
    pub fn secret_matches(&self, secret: &str) -> bool {
        match &self.auth {
            ClientAuth::None => false,
            ClientAuth::Secret(expected) => {
                same_secret(&hash(secret), &expected.to_ascii_lowercase())
            }
        }
    }

    /// The name the consent page shows.
    #[must_use]
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.client_id)
    }

    fn configured(client: &ConfiguredClient) -> Self {
        Self {
            client_id: client.client_id.clone(),
            kind: ClientKind::Configured,
            name: client.name.clone(),
            redirect_uris: client.redirect_uris.clone(),
            native: false,
            auth: ClientAuth::Secret(client.client_secret_sha256.clone()),
            grant_types: client.grant_types.clone(),
            roles: client.roles.clone(),
        }
    }

    /// A registered client from its stored record.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when the record's metadata cannot be read.
    pub fn from_record(record: &ClientRecord) -> Result<Self, StoreError> {
        let corrupt = || {
            StoreError::Corrupt(format!(
                "client {} has unreadable metadata",
                record.client_id
            ))
        };
        let metadata = &record.metadata;
        let strings = |key: &str| -> Option<Vec<String>> {
            metadata
                .get(key)?
                .as_array()?
                .iter()
                .map(|value| value.as_str().map(str::to_owned))
                .collect()
        };
        let redirect_uris = strings("redirect_uris").ok_or_else(corrupt)?;
        let grant_types = strings("grant_types")
            .ok_or_else(corrupt)?
            .iter()
            .filter_map(|grant| GrantType::parse(grant))
            .collect();
        Ok(Self {
            client_id: record.client_id.clone(),
            kind: ClientKind::Registered,
            name: metadata
                .get("client_name")
                .and_then(Value::as_str)
                .map(str::to_owned),
            redirect_uris,
            native: metadata.get("application_type").and_then(Value::as_str) == Some("native"),
            auth: record
                .secret_hash
                .clone()
                .map_or(ClientAuth::None, ClientAuth::Secret),
            grant_types,
            roles: Vec::new(),
        })
    }

    /// The metadata a registered client's record keeps.
    pub(crate) fn record_metadata(&self, auth_method: &str) -> Value {
        let grants: Vec<&str> = self
            .grant_types
            .iter()
            .map(|grant| grant.as_str())
            .collect();
        json!({
            "redirect_uris": self.redirect_uris,
            "client_name": self.name,
            "application_type": if self.native { "native" } else { "web" },
            "grant_types": grants,
            "token_endpoint_auth_method": auth_method,
        })
    }
}

/// Why a client could not be found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// No client has that id.
    #[error("unknown client")]
    Unknown,
    /// Its metadata document was refused.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Finds clients of every kind.
pub(crate) struct Clients {
    configured: HashMap<String, Client>,
    documents: DocumentFetcher,
}

impl Clients {
    pub(crate) fn new(configured: &[ConfiguredClient], documents: DocumentFetcher) -> Self {
        Self {
            configured: configured
                .iter()
                .map(|client| (client.client_id.clone(), Client::configured(client)))
                .collect(),
            documents,
        }
    }

    /// The client named `client_id`.
    pub(crate) async fn find(
        &self,
        store: &dyn OAuthStore,
        client_id: &str,
    ) -> Result<Client, LookupError> {
        if client_id.starts_with("https://") {
            let document = self.documents.fetch(client_id).await?;
            return Ok(Client {
                client_id: document.client_id,
                kind: ClientKind::Document,
                name: document.client_name,
                redirect_uris: document.redirect_uris,
                native: document.native,
                auth: ClientAuth::None,
                grant_types: vec![GrantType::AuthorizationCode, GrantType::RefreshToken],
                roles: Vec::new(),
            });
        }
        if let Some(client) = self.configured.get(client_id) {
            return Ok(client.clone());
        }
        if client_id.is_empty() || client_id.len() > 256 {
            return Err(LookupError::Unknown);
        }
        match store.client(client_id).await? {
            Some(record) => Ok(Client::from_record(&record)?),
            None => Err(LookupError::Unknown),
        }
    }
}
