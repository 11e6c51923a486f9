//! [`CatalogError`]: why an asset, call-record, script, run or retention
//! operation failed, whichever store answered.

/// Why a catalog operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CatalogError {
    /// The database could not be reached or refused the statement.
    #[error("the catalog is unavailable: {0}")]
    Unavailable(String),
    /// A stored value could not be read back.
    #[error("a stored catalog row is corrupt: {0}")]
    Corrupt(String),
    /// A row with this id already exists.
    #[error("a catalog row with this id already exists")]
    Duplicate,
    /// A value to store is out of range (a negative size, an empty id).
    #[error("invalid catalog value: {0}")]
    Invalid(String),
    /// The owner already holds as many rows of this kind as one owner may (the
    /// limit given).
    #[error("the owner already holds {0}, the most one owner may")]
    LimitReached(u32),
    /// A change was made against a version that is no longer the newest
    /// (compare-and-set): the row is now at this version.
    #[error("the row changed since it was read; it is now at version {0}")]
    Stale(i32),
}

/// Refuses a value before any store sees it, so the caller hears what is wrong
/// rather than a constraint name from a database (the tables check the same
/// rules as a backstop).
pub(crate) fn require(valid: bool, rule: &str) -> Result<(), CatalogError> {
    if valid {
        Ok(())
    } else {
        Err(CatalogError::Invalid(rule.to_owned()))
    }
}
