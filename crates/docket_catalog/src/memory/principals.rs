//! [`MemoryPrincipals`]: the principal directory in a mutex-guarded map.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::{lock, page};
use crate::CatalogError;
use crate::principals::{PrincipalStore, validate};

/// A principal's claims and when they were last seen.
type Row = (Map<String, Value>, OffsetDateTime);

/// A [`PrincipalStore`] in memory.
#[derive(Debug, Default)]
pub struct MemoryPrincipals {
    /// Each subject's claims and when they were last seen.
    principals: Mutex<HashMap<String, Row>>,
}

impl MemoryPrincipals {
    /// Nobody remembered.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl PrincipalStore for MemoryPrincipals {
    async fn remember(
        &self,
        subject: &str,
        claims: &Map<String, Value>,
        now: OffsetDateTime,
    ) -> Result<(), CatalogError> {
        validate(subject, claims)?;
        let mut principals = lock(&self.principals);
        match principals.get_mut(subject) {
            Some((_, seen_at)) if *seen_at > now => {}
            Some(row) => *row = (claims.clone(), now),
            None => {
                principals.insert(subject.to_owned(), (claims.clone(), now));
            }
        }
        Ok(())
    }

    async fn claims_of(&self, subject: &str) -> Result<Option<Map<String, Value>>, CatalogError> {
        Ok(lock(&self.principals)
            .get(subject)
            .map(|(claims, _)| claims.clone()))
    }

    async fn forget_unseen_before(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        let mut principals = lock(&self.principals);
        let mut due: Vec<(OffsetDateTime, String)> = principals
            .iter()
            .filter(|(_, (_, seen_at))| *seen_at < cutoff)
            .map(|(subject, (_, seen_at))| (*seen_at, subject.clone()))
            .collect();
        due.sort();
        due.truncate(page(limit));
        for (_, subject) in &due {
            principals.remove(subject);
        }
        Ok(u64::try_from(due.len()).unwrap_or(u64::MAX))
    }
}
