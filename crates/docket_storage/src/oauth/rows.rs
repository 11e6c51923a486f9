//! The authorization server's rows as both backends' statements return them,
//! written once over [`Columns`], and how each becomes its `docket_oauth`
//! value. Statements name the columns with the matching macro
//! (`client_columns!()`, …), so each list is written once too.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use docket_oauth::{ClientRecord, RefreshToken, SigningKey, StoreError};

use super::json_value;
use crate::columns::{Columns, StoredValue, optional};

/// The columns a client is read by, in [`ClientRow`]'s order.
macro_rules! client_columns {
    () => {
        "client_id, metadata, secret_hash, registered_at, last_used_at"
    };
}
pub(crate) use client_columns;

/// A registered client as read ([`client_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct ClientRow<C: Columns> {
    #[diesel(sql_type = Text)]
    client_id: String,
    #[diesel(sql_type = Text)]
    metadata: String,
    #[diesel(sql_type = Nullable<Text>)]
    secret_hash: Option<String>,
    #[diesel(sql_type = C::TimeSql)]
    registered_at: C::Time,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    last_used_at: Option<C::Time>,
}

impl<C: Columns> ClientRow<C> {
    /// The client, or [`StoreError::Corrupt`] when a column does not read back.
    pub(crate) fn into_client(self) -> Result<ClientRecord, StoreError> {
        Ok(ClientRecord {
            metadata: json_value(&self.metadata, "a client's metadata")?,
            client_id: self.client_id,
            secret_hash: self.secret_hash,
            registered_at: self.registered_at.value()?,
            last_used_at: optional(self.last_used_at)?,
        })
    }
}

/// The columns a refresh token is read by, in [`TokenRow`]'s order, of the
/// table aliased `t`.
macro_rules! token_columns {
    () => {
        "t.token_hash, t.family, t.client_id, t.subject, t.grant_payload, t.issued_at, \
         t.expires_at"
    };
}
pub(crate) use token_columns;

/// A refresh token as read ([`token_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct TokenRow<C: Columns> {
    #[diesel(sql_type = Text)]
    token_hash: String,
    #[diesel(sql_type = Text)]
    family: String,
    #[diesel(sql_type = Text)]
    client_id: String,
    #[diesel(sql_type = Text)]
    subject: String,
    #[diesel(sql_type = Text)]
    grant_payload: String,
    #[diesel(sql_type = C::TimeSql)]
    issued_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    expires_at: C::Time,
}

impl<C: Columns> TokenRow<C> {
    /// The family's id.
    #[cfg_attr(
        not(feature = "sqlite"),
        expect(
            dead_code,
            reason = "only SQLite's rotation reads it in Rust; PostgreSQL's does it in SQL"
        )
    )]
    pub(crate) fn family(&self) -> &str {
        &self.family
    }

    /// The token, or [`StoreError::Corrupt`] when a column does not read back.
    pub(crate) fn into_token(self) -> Result<RefreshToken, StoreError> {
        Ok(RefreshToken {
            grant: json_value(&self.grant_payload, "a refresh token's grant")?,
            token_hash: self.token_hash,
            family: self.family,
            client_id: self.client_id,
            subject: self.subject,
            issued_at: self.issued_at.value()?,
            expires_at: self.expires_at.value()?,
        })
    }
}

/// A presented refresh token with what decides its rotation: whether its
/// family has ended at the presentation's `now` (`ended`), and whether it was
/// replaced or its family revoked (`spent`).
#[derive(QueryableByName)]
pub(crate) struct PresentedRow<C: Columns> {
    #[diesel(embed)]
    pub(crate) token: TokenRow<C>,
    #[diesel(sql_type = Bool)]
    pub(crate) ended: bool,
    #[diesel(sql_type = Bool)]
    #[cfg_attr(
        not(feature = "sqlite"),
        expect(
            dead_code,
            reason = "only SQLite's rotation reads it in Rust; PostgreSQL's does it in SQL"
        )
    )]
    pub(crate) spent: bool,
}

/// What a presented refresh token is read by: [`token_columns!`], then
/// `ended` (against the statement's time placeholder) and `spent`, from the
/// tokens `t` joined with their families `f`.
macro_rules! presented_columns {
    ($now:literal) => {
        concat!(
            token_columns!(),
            ", f.expires_at <= ",
            $now,
            " AS ended, (t.used_at IS NOT NULL OR f.revoked_at IS NOT NULL) AS spent \
             FROM oauth_refresh_tokens t JOIN oauth_refresh_families f ON f.family = t.family"
        )
    };
}
pub(crate) use presented_columns;

/// The columns a signing key is read by, in [`KeyRow`]'s order.
macro_rules! key_columns {
    () => {
        "kid, private_pkcs8, public_jwk, created_at"
    };
}
pub(crate) use key_columns;

/// A signing key as read ([`key_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct KeyRow<C: Columns> {
    #[diesel(sql_type = Text)]
    kid: String,
    #[diesel(sql_type = Text)]
    private_pkcs8: String,
    #[diesel(sql_type = Text)]
    public_jwk: String,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
}

impl<C: Columns> KeyRow<C> {
    /// The key, or [`StoreError::Corrupt`] when a column does not read back.
    pub(crate) fn into_key(self) -> Result<SigningKey, StoreError> {
        Ok(SigningKey {
            public_jwk: json_value(&self.public_jwk, "a signing key's JWK")?,
            kid: self.kid,
            private_pkcs8: self.private_pkcs8,
            created_at: self.created_at.value()?,
        })
    }
}

/// A one-shot record's payload and whether this take was its first.
#[derive(QueryableByName)]
pub(crate) struct TakenRow {
    #[diesel(sql_type = Text)]
    pub(crate) payload: String,
    #[diesel(sql_type = Bool)]
    pub(crate) fresh: bool,
}

/// A count (`… AS count`).
#[derive(QueryableByName)]
pub(crate) struct CountRow {
    #[diesel(sql_type = BigInt)]
    pub(crate) count: i64,
}

/// A family's id (`… AS family`).
#[derive(QueryableByName)]
pub(crate) struct FamilyRow {
    #[diesel(sql_type = Text)]
    pub(crate) family: String,
}
