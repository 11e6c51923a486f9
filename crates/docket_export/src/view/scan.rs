//! A text asset read row by row from the nearest checkpoint at or before the first row
//! a page wants, recording new checkpoints as rows go by, so paging on from any page
//! reads at most one checkpoint interval of rows before the page.

use super::checkpoints::{AssetKey, Checkpoint, Checkpoints};
use super::error::ViewError;
use super::records::{Framer, RecordReader};
use crate::sink::ObjectSink;

/// A text asset and the viewer state its scans use.
#[derive(Debug, Clone, Copy)]
pub(super) struct TextAsset<'a> {
    /// Where the asset is.
    pub(super) sink: &'a dyn ObjectSink,
    /// Its object key.
    pub(super) key: &'a str,
    /// The viewer's cache.
    pub(super) checkpoints: &'a Checkpoints,
    /// A checkpoint is recorded at every row index that is a multiple of this.
    pub(super) checkpoint_every: u64,
}

/// An open scan over a text asset's rows.
pub(super) struct RowScan<'a, F> {
    records: RecordReader<F>,
    checkpoints: &'a Checkpoints,
    asset: AssetKey,
    object_size: u64,
    at_object_start: bool,
    next_row: u64,
    checkpoint_every: u64,
    found: Vec<Checkpoint>,
}

impl<'a, F: Framer> RowScan<'a, F> {
    /// Opens `asset`, read as `format`, at the nearest checkpoint at or before
    /// `first_row`. `framer(true)` frames from the object's first byte,
    /// `framer(false)` from a checkpoint (where a row starts).
    ///
    /// # Errors
    ///
    /// [`ViewError::Sink`] when the object cannot be opened.
    pub(super) async fn open(
        asset: TextAsset<'a>,
        format: &'static str,
        first_row: u64,
        framer: impl Fn(bool) -> F,
    ) -> Result<Self, ViewError> {
        let key = AssetKey {
            format,
            key: asset.key.to_owned(),
        };
        let known = asset.checkpoints.nearest(&key, first_row);
        let mut start = known
            .and_then(|known| known.checkpoint)
            .unwrap_or(Checkpoint { row: 0, offset: 0 });
        let mut content = asset.sink.open_at(asset.key, start.offset).await?;
        let mut object_size = start.offset + content.size();
        if known.is_some_and(|known| known.object_size != object_size) {
            // Not the object the checkpoints were found in: start over from its start.
            asset.checkpoints.forget(&key);
            if start.offset > 0 {
                start = Checkpoint { row: 0, offset: 0 };
                content = asset.sink.open_at(asset.key, 0).await?;
                object_size = content.size();
            }
        }
        // No checkpoint is ever at offset 0 (row 0 gets none), so offset 0 is the
        // object's start, where a CSV header or a JSON array's `[` comes first.
        let at_object_start = start.offset == 0;
        Ok(Self {
            records: RecordReader::new(
                content.into_stream(),
                start.offset,
                framer(at_object_start),
            ),
            checkpoints: asset.checkpoints,
            asset: key,
            object_size,
            at_object_start,
            next_row: start.row,
            checkpoint_every: asset.checkpoint_every.max(1),
            found: Vec::new(),
        })
    }

    /// Whether the scan starts at the object's first byte rather than at a checkpoint.
    pub(super) fn at_object_start(&self) -> bool {
        self.at_object_start
    }

    /// The next record, not counted as a row: the CSV header, read at the object's
    /// start.
    ///
    /// # Errors
    ///
    /// As [`RecordReader::next`].
    pub(super) async fn next_header(&mut self) -> Result<Option<&[u8]>, ViewError> {
        Ok(self.records.next().await?.map(|record| record.bytes))
    }

    /// Passes over rows until row `row` is next; `false` when the asset ends first.
    ///
    /// # Errors
    ///
    /// As [`RecordReader::next`].
    pub(super) async fn skip_to(&mut self, row: u64) -> Result<bool, ViewError> {
        while self.next_row < row {
            if self.next_row().await?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The next row's index and bytes, or `None` at the end of the asset.
    ///
    /// # Errors
    ///
    /// As [`RecordReader::next`].
    pub(super) async fn next_row(&mut self) -> Result<Option<(u64, &[u8])>, ViewError> {
        let row = self.next_row;
        let Some(record) = self.records.next().await? else {
            return Ok(None);
        };
        if row > 0 && row.is_multiple_of(self.checkpoint_every) {
            self.found.push(Checkpoint {
                row,
                offset: record.offset,
            });
        }
        self.next_row += 1;
        Ok(Some((row, record.bytes)))
    }

    /// Whether a row follows. A next row that is too large or malformed still
    /// counts: it is there, and the page that shows it says what is wrong with it.
    ///
    /// # Errors
    ///
    /// [`ViewError::Sink`] when reading fails.
    pub(super) async fn has_more(&mut self) -> Result<bool, ViewError> {
        match self.next_row().await {
            Ok(next) => Ok(next.is_some()),
            Err(ViewError::TooLarge { .. } | ViewError::Malformed { .. }) => Ok(true),
            Err(error) => Err(error),
        }
    }

    /// Keeps the checkpoints found on the way for later pages.
    pub(super) fn finish(self) {
        self.checkpoints
            .remember(&self.asset, self.object_size, &self.found);
    }
}
