//! The rows of link keys and asset shares as both backends' statements return
//! them, written once over [`Columns`], and how each becomes its domain value.
//! Every statement returning one names its columns with the matching macro
//! (`link_key_columns!()`, `share_columns!()`). A share's named people are a
//! JSON array as text on both backends.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use docket_catalog::{CatalogError, LinkKey, Share, ShareAudience};

use crate::columns::{Columns, StoredValue, optional};

/// The columns a link key is read by, in [`LinkKeyRow`]'s order.
macro_rules! link_key_columns {
    () => {
        "kid, secret, created_at"
    };
}
pub(crate) use link_key_columns;

/// The columns a share is read by, in [`ShareRow`]'s order.
macro_rules! share_columns {
    () => {
        "id, asset_id, owner, audience, people, expires_at, created_at, revoked_at, \
         open_count, last_opened_at"
    };
}
pub(crate) use share_columns;

/// A link key as read ([`link_key_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct LinkKeyRow<C: Columns> {
    #[diesel(sql_type = Text)]
    kid: String,
    #[diesel(sql_type = Text)]
    secret: String,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
}

impl<C: Columns> LinkKeyRow<C> {
    /// The key.
    pub(crate) fn into_key(self) -> Result<LinkKey, CatalogError> {
        Ok(LinkKey {
            kid: self.kid,
            secret: self.secret,
            created_at: self.created_at.value()?,
        })
    }
}

/// A share as read ([`share_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct ShareRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    asset_id: String,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Text)]
    audience: String,
    #[diesel(sql_type = Text)]
    people: String,
    #[diesel(sql_type = C::TimeSql)]
    expires_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    revoked_at: Option<C::Time>,
    #[diesel(sql_type = BigInt)]
    open_count: i64,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    last_opened_at: Option<C::Time>,
}

impl<C: Columns> ShareRow<C> {
    /// The share, or [`CatalogError::Corrupt`] for an audience the domain does
    /// not know.
    pub(crate) fn into_share(self) -> Result<Share, CatalogError> {
        let people: Vec<String> = serde_json::from_str(&self.people).map_err(|err| {
            CatalogError::Corrupt(format!("a share's people are not a JSON array: {err}"))
        })?;
        let audience = ShareAudience::from_parts(&self.audience, people).ok_or_else(|| {
            CatalogError::Corrupt(format!("a share's audience `{}`", self.audience))
        })?;
        Ok(Share {
            id: self.id,
            asset_id: self.asset_id,
            owner: self.owner,
            audience,
            expires_at: self.expires_at.value()?,
            created_at: self.created_at.value()?,
            revoked_at: optional(self.revoked_at)?,
            open_count: self.open_count,
            last_opened_at: optional(self.last_opened_at)?,
        })
    }
}

/// A share's named people as the column stores them.
pub(crate) fn people_text(audience: &ShareAudience) -> String {
    // A list of strings always encodes.
    serde_json::to_string(audience.people()).unwrap_or_else(|_| "[]".to_owned())
}
