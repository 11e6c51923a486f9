//! Why a page could not be shown.

use crate::sink::SinkError;

/// Why [`Viewer::page`](super::Viewer::page) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The format has no row view: XLSX, any other name, or Parquet in a build
    /// without the `parquet` feature.
    #[error("assets in the {format:?} format cannot be viewed row by row")]
    NotViewable {
        /// The format as given.
        format: String,
    },
    /// Reading the asset from its sink failed.
    #[error("could not read the asset")]
    Sink(#[from] SinkError),
    /// The asset's bytes are not what its format says: invalid UTF-8, a CSV record
    /// of the wrong width, a JSON row that is not an object, a truncated file.
    #[error("the asset is malformed: {reason}")]
    Malformed {
        /// What is wrong, and where.
        reason: String,
    },
    /// A record, or what a Parquet page needs, is larger than the viewer reads.
    #[error("{what} is larger than {limit_bytes} bytes")]
    TooLarge {
        /// What is too large, such as `a row`.
        what: &'static str,
        /// The limit, in bytes.
        limit_bytes: u64,
    },
    /// The Parquet reader failed.
    #[cfg(feature = "parquet")]
    #[error("could not read the parquet asset")]
    Parquet(#[source] ::parquet::errors::ParquetError),
}

impl ViewError {
    /// A [`ViewError::Malformed`] saying `reason`.
    pub(super) fn malformed(reason: impl Into<String>) -> Self {
        Self::Malformed {
            reason: reason.into(),
        }
    }
}
