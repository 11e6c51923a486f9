//! Assets as resources: `docket://assets/{id}` names each asset, `resources/list`
//! pages through the caller's own, and `resources/read` sends one's contents (text
//! inline, anything else as a base64 blob) up to `server.max_resource_read_bytes`;
//! a larger asset is refused with its size and download URL. An asset that is not
//! the caller's reads exactly as one that does not exist.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use docket_catalog::{Asset, PageCursor};
use docket_protocol::resources::Resource;
use docket_protocol::tools::{ContentBlock, ResourceContents, ResourceLink};
use futures_util::StreamExt as _;

use crate::assets::{Assets, visible_asset};
use crate::features::{
    ListFuture, ResourceError, ResourceLister, ResourceRead, ResourceTemplateSpec,
};

/// The template every asset's URI follows.
pub(crate) const ASSET_TEMPLATE: &str = "docket://assets/{id}";

/// How many assets one page of `resources/list` holds.
const PAGE: u32 = 50;

/// An asset's resource URI.
pub(crate) fn asset_uri(id: &str) -> String {
    format!("docket://assets/{id}")
}

/// The template as `resources/templates/list` shows it.
pub(crate) fn template_spec() -> ResourceTemplateSpec {
    ResourceTemplateSpec::new(ASSET_TEMPLATE, "Assets").with_description(
        "What an export wrote, by asset id: text inline, anything else as a base64 blob; \
         an asset larger than the server sends this way is refused with its download URL.",
    )
}

/// The key of a resource link's `_meta` that holds the asset's signed download URL.
pub(crate) const DOWNLOAD_URL_META: &str = "io.docket/download_url";

/// The link an export's result carries to the asset it wrote. Its `uri` is the
/// asset's resource (what `resources/read` reads); its `_meta` carries the signed
/// `download_url` that opens in a browser with no header.
pub(crate) fn resource_link(asset: &Asset, download_url: &str) -> ContentBlock {
    let mut meta = serde_json::Map::new();
    meta.insert(DOWNLOAD_URL_META.to_owned(), download_url.into());
    let mut extra = docket_protocol::JsonObject::new();
    extra.insert("_meta".to_owned(), meta.into());
    ContentBlock::ResourceLink(ResourceLink {
        uri: asset_uri(&asset.id),
        name: asset.name.clone(),
        description: asset.description.clone(),
        mime_type: Some(asset.content_type.clone()),
        size: u64::try_from(asset.size_bytes).ok(),
        extra,
    })
}

/// Reads assets for `resources/read` and lists them for `resources/list`.
pub(crate) struct AssetResources {
    pub(crate) assets: Assets,
    /// The most bytes one read sends.
    pub(crate) max_read_bytes: u64,
}

impl AssetResources {
    /// The contents of the asset `read` names, for its owner or an administrator.
    pub(crate) async fn read(
        &self,
        read: ResourceRead,
    ) -> Result<Vec<ResourceContents>, ResourceError> {
        let id = read
            .variables
            .get("id")
            .map(String::as_str)
            .unwrap_or_default();
        let asset = visible_asset(&self.assets, id, &read.identity.subject, read.is_admin)
            .await
            .map_err(|err| {
                ResourceError::Unavailable(format!(
                    "the asset store is unavailable; try again: {err}"
                ))
            })?
            .ok_or(ResourceError::NotFound)?;
        let size = u64::try_from(asset.size_bytes).unwrap_or(u64::MAX);
        let download_url = self.assets.download_url(&asset).await;
        if size > self.max_read_bytes {
            return Err(ResourceError::Refused(format!(
                "asset {} is {size} bytes, more than resources/read sends ({} bytes); \
                 download it from {download_url}",
                asset.id, self.max_read_bytes,
            )));
        }
        let unreadable = |err: &dyn std::fmt::Display| {
            tracing::error!(error = %err, asset = asset.id, "could not read an asset's bytes");
            ResourceError::Unavailable(format!(
                "the bytes of asset {} could not be read; try again, or download them from \
                 {download_url}",
                asset.id,
            ))
        };
        let mut stream = self
            .assets
            .sink
            .open(&asset.storage_key)
            .await
            .map_err(|err| unreadable(&err))?
            .into_stream();
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            bytes.extend_from_slice(&chunk.map_err(|err| unreadable(&err))?);
            // The row's size is a promise; the bytes are held to the same bound.
            if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > self.max_read_bytes {
                return Err(unreadable(&"the asset's bytes outgrew its recorded size"));
            }
        }
        let (text, blob) = if is_text(&asset.content_type) {
            match String::from_utf8(bytes) {
                Ok(text) => (Some(text), None),
                Err(err) => (None, Some(STANDARD.encode(err.into_bytes()))),
            }
        } else {
            (None, Some(STANDARD.encode(&bytes)))
        };
        Ok(vec![ResourceContents {
            uri: read.uri,
            mime_type: Some(asset.content_type),
            text,
            blob,
            meta: None,
        }])
    }
}

/// Whether a media type is text a client can read inline.
fn is_text(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/json" | "application/x-ndjson" | "application/xml" | "application/csv"
        )
}

impl ResourceLister for AssetResources {
    fn list<'a>(&'a self, subject: &'a str, cursor: Option<&'a str>) -> ListFuture<'a> {
        Box::pin(async move {
            let before = match cursor {
                Some(token) => Some(PageCursor::decode(token).ok_or_else(|| {
                    ResourceError::Refused(
                        "invalid cursor: send back a nextCursor exactly as it was given".to_owned(),
                    )
                })?),
                None => None,
            };
            let page = self
                .assets
                .store
                .list(Some(subject), PAGE, before.as_ref())
                .await
                .map_err(|err| {
                    ResourceError::Unavailable(format!(
                        "the asset store is unavailable; try again: {err}"
                    ))
                })?;
            let next = (page.len() >= usize::try_from(PAGE).unwrap_or(usize::MAX))
                .then(|| page.last().map(|asset| asset.cursor().encode()))
                .flatten();
            let resources = page
                .iter()
                .map(|asset| Resource {
                    uri: asset_uri(&asset.id),
                    name: asset.name.clone(),
                    title: None,
                    description: asset.description.clone(),
                    mime_type: Some(asset.content_type.clone()),
                    size: u64::try_from(asset.size_bytes).ok(),
                })
                .collect();
            Ok((resources, next))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use bytes::Bytes;
    use docket_catalog::{AssetStore as _, NewAsset};
    use docket_export::sink::{FilesystemSink, ObjectSink as _};

    use super::*;
    use crate::auth::Identity;

    /// Binary assets are read as a base64 blob, byte for byte, and only by their owner.
    #[tokio::test]
    async fn a_binary_asset_reads_as_a_blob() {
        let root = std::env::temp_dir().join(format!(
            "docket-asset-resources-{}",
            docket_catalog::generate_id().expect("random")
        ));
        let sink = Arc::new(FilesystemSink::new(&root));
        let bytes: &[u8] = b"PAR1\x00\xff\x10binaryPAR1";
        let mut upload = sink.begin("owner/blob.parquet").await.expect("begin");
        upload
            .write(Bytes::from_static(bytes))
            .await
            .expect("write");
        upload.commit().await.expect("commit");
        let store = Arc::new(docket_catalog::memory::MemoryAssets::new());
        let id = docket_catalog::generate_id().expect("random");
        store
            .create_or_get(NewAsset {
                id: id.clone(),
                owner: "anonymous".into(),
                name: "blob".into(),
                description: None,
                tags: Vec::new(),
                format: "parquet".into(),
                content_type: "application/vnd.apache.parquet".into(),
                storage_key: "owner/blob.parquet".into(),
                size_bytes: i64::try_from(bytes.len()).expect("small"),
                row_count: None,
                connection: None,
                tool: "trino_export".into(),
                idempotency_key: None,
                task_id: None,
                call_id: None,
            })
            .await
            .expect("asset");
        let resources = AssetResources {
            assets: Assets {
                store,
                calls: None,
                sink,
                links: Arc::new(crate::links::Links::new(
                    Arc::new(docket_catalog::memory::MemoryLinks::new()),
                    &crate::config::StorageConfig::default(),
                    "http://127.0.0.1:8080".into(),
                )),
                changes: Arc::new(docket_catalog::memory::MemoryChangeFeed::new()),
                record_patience: std::time::Duration::ZERO,
            },
            max_read_bytes: 1024,
        };
        let read = |subject: &str| ResourceRead {
            uri: asset_uri(&id),
            variables: BTreeMap::from([("id".to_owned(), id.clone())]),
            identity: Arc::new(Identity {
                subject: subject.to_owned(),
                ..Identity::anonymous(Vec::new())
            }),
            is_admin: false,
        };
        let contents = resources.read(read("anonymous")).await.expect("read");
        let blob = contents[0].blob.as_deref().expect("a blob");
        assert_eq!(STANDARD.decode(blob).expect("base64"), bytes);
        assert_eq!(contents[0].text, None);
        assert!(matches!(
            resources.read(read("someone-else")).await,
            Err(ResourceError::NotFound)
        ));
        let _ = std::fs::remove_dir_all(&root);
    }

    /// An export's resource link keeps the resource URI that resources/read
    /// reads, and carries the signed download URL in its `_meta`.
    #[test]
    fn a_resource_link_carries_the_signed_download_url() {
        let asset = crate::assets::sample_asset("orders", "csv");
        let url = "http://127.0.0.1:8080/assets/0123456789abcdef0123456789abcdef/content?expires=1";
        let ContentBlock::ResourceLink(link) = resource_link(&asset, url) else {
            panic!("a resource link");
        };
        assert_eq!(link.uri, asset_uri(&asset.id));
        assert_eq!(link.extra["_meta"][DOWNLOAD_URL_META], url);
    }

    #[test]
    fn text_is_what_reads_as_text() {
        for text in [
            "text/csv",
            "text/plain; charset=utf-8",
            "application/json",
            "application/x-ndjson",
        ] {
            assert!(is_text(text), "{text}");
        }
        for binary in [
            "application/vnd.apache.parquet",
            "application/octet-stream",
            "image/png",
        ] {
            assert!(!is_text(binary), "{binary}");
        }
    }
}
