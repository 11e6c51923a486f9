//! Object sinks: the filesystem sink's atomic commit, abort and drop, hostile keys, and
//! (in `s3`) the S3 sink against a real S3-compatible server.

mod s3;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use docket_export::sink::{FilesystemSink, ObjectSink, SinkError, validate_key};
use futures_util::TryStreamExt as _;

/// A fresh folder under cargo's temporary folder for tests, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new(label: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "docket-export-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a temporary folder");
        Self(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file under `root`, relative, sorted (hidden temporary files included).
pub(crate) fn files_under(root: &Path) -> Vec<String> {
    fn walk(root: &Path, folder: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(folder).expect("read folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(root, &path, found);
            } else {
                let relative = path.strip_prefix(root).expect("under root");
                found.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    let mut found = Vec::new();
    walk(root, root, &mut found);
    found.sort();
    found
}

/// A deterministic byte pattern of `length` bytes.
pub(crate) fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length)
        .map(|index| (index % 251) as u8 ^ seed)
        .collect()
}

/// Reads an object back whole, checking the announced size.
pub(crate) async fn read_back(sink: &dyn ObjectSink, key: &str) -> Vec<u8> {
    let content = sink.open(key).await.expect("open");
    let size = content.size();
    let chunks: Vec<Bytes> = content.into_stream().try_collect().await.expect("read");
    let bytes = chunks.concat();
    assert_eq!(bytes.len() as u64, size, "the size matches the bytes");
    bytes
}

#[tokio::test]
async fn filesystem_objects_appear_only_on_commit() {
    let root = TempDir::new("fs-commit");
    let sink = FilesystemSink::new(root.path());
    let key = "alice/0123abcd/content.csv";
    let data = pattern(300_000, 7);

    let mut upload = sink.begin(key).await.expect("begin");
    for chunk in data.chunks(100_000) {
        upload
            .write(Bytes::copy_from_slice(chunk))
            .await
            .expect("write");
        assert!(matches!(
            sink.size(key).await,
            Err(SinkError::NotFound { .. })
        ));
        assert!(matches!(
            sink.open(key).await,
            Err(SinkError::NotFound { .. })
        ));
    }
    assert_eq!(upload.bytes_written(), 300_000);
    // Only a hidden temporary file exists, outside the key space.
    let during = files_under(root.path());
    assert_eq!(during.len(), 1, "{during:?}");
    assert!(
        during[0].starts_with("alice/0123abcd/.content.csv."),
        "{during:?}"
    );
    assert!(during[0].ends_with(".part"), "{during:?}");

    assert_eq!(upload.commit().await.expect("commit"), 300_000);
    assert_eq!(files_under(root.path()), ["alice/0123abcd/content.csv"]);
    assert_eq!(sink.size(key).await.expect("size"), 300_000);
    let content = sink.open(key).await.expect("open");
    let chunks: Vec<Bytes> = content.into_stream().try_collect().await.expect("read");
    assert!(chunks.len() >= 5, "streamed in chunks, not read whole");
    assert!(chunks.iter().all(|chunk| chunk.len() <= 64 * 1024));
    assert_eq!(chunks.concat(), data);

    sink.delete(key).await.expect("delete");
    assert!(matches!(
        sink.size(key).await,
        Err(SinkError::NotFound { .. })
    ));
    sink.delete(key).await.expect("deleting again succeeds");
}

/// Reads from byte `start` of an object to its end, checking the announced size.
pub(crate) async fn read_from(sink: &dyn ObjectSink, key: &str, start: u64) -> Vec<u8> {
    let content = sink.open_at(key, start).await.expect("open_at");
    let size = content.size();
    let chunks: Vec<Bytes> = content.into_stream().try_collect().await.expect("read");
    let bytes = chunks.concat();
    assert_eq!(
        bytes.len() as u64,
        size,
        "the size is what the stream yields"
    );
    bytes
}

#[tokio::test]
async fn filesystem_open_at_reads_from_an_offset_to_the_end() {
    let root = TempDir::new("fs-open-at");
    let sink = FilesystemSink::new(root.path());
    let data = pattern(200_000, 5);
    let mut upload = sink.begin("a/content.csv").await.expect("begin");
    upload
        .write(Bytes::copy_from_slice(&data))
        .await
        .expect("write");
    upload.commit().await.expect("commit");

    for start in [0_u64, 1, 65_535, 65_536, 150_001, 199_999] {
        assert!(
            read_from(&sink, "a/content.csv", start).await == data[start as usize..],
            "from {start}"
        );
    }
    for past in [200_000_u64, 200_001, u64::MAX] {
        assert_eq!(
            read_from(&sink, "a/content.csv", past).await,
            b"",
            "from {past}"
        );
    }
    let empty = sink.begin("a/empty").await.expect("begin");
    empty.commit().await.expect("commit");
    assert_eq!(read_from(&sink, "a/empty", 0).await, b"");
    assert_eq!(read_from(&sink, "a/empty", 3).await, b"");
    assert!(matches!(
        sink.open_at("a/missing", 1).await,
        Err(SinkError::NotFound { .. })
    ));
    assert!(matches!(
        sink.open_at("../escape", 1).await,
        Err(SinkError::InvalidKey { .. })
    ));
}

#[tokio::test]
async fn filesystem_abort_and_drop_leave_nothing() {
    let root = TempDir::new("fs-abort");
    let sink = FilesystemSink::new(root.path());

    let mut upload = sink.begin("a/aborted.json").await.expect("begin");
    upload
        .write(Bytes::from_static(b"[\n{\"partial\":"))
        .await
        .expect("write");
    upload.abort().await.expect("abort");
    assert!(matches!(
        sink.size("a/aborted.json").await,
        Err(SinkError::NotFound { .. })
    ));
    assert_eq!(files_under(root.path()), Vec::<String>::new());

    let mut upload = sink.begin("a/dropped.json").await.expect("begin");
    upload
        .write(Bytes::from_static(b"[\n{\"partial\":"))
        .await
        .expect("write");
    drop(upload);
    assert!(matches!(
        sink.open("a/dropped.json").await,
        Err(SinkError::NotFound { .. })
    ));
    assert_eq!(files_under(root.path()), Vec::<String>::new());
}

/// A process killed mid-upload leaves its `.part` file; the start-up clean-up
/// removes the ones older than its age, and nothing else.
#[tokio::test]
async fn stale_part_files_are_removed_and_nothing_else() {
    let root = TempDir::new("fs-stale-parts");
    let sink = FilesystemSink::new(root.path());
    let mut upload = sink.begin("a/done.csv").await.expect("begin");
    upload
        .write(Bytes::from_static(b"x\n"))
        .await
        .expect("write");
    upload.commit().await.expect("commit");
    // A running upload, as another replica would hold it.
    let mut running = sink.begin("a/running.csv").await.expect("begin");
    running
        .write(Bytes::from_static(b"x"))
        .await
        .expect("write");
    let folder = root.path().join("a/b");
    std::fs::create_dir_all(&folder).expect("folder");
    let stale = folder.join(".killed.csv.0011223344556677.part");
    std::fs::write(&stale, b"half an export").expect("stale");
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .expect("open")
        .set_modified(an_hour_ago)
        .expect("mtime");
    let before = files_under(root.path());

    let removed = sink
        .remove_stale_parts(std::time::Duration::from_secs(600))
        .await
        .expect("clean-up");
    assert_eq!(removed, 1);
    let after = files_under(root.path());
    assert_eq!(after.len(), before.len() - 1, "{before:?} → {after:?}");
    assert!(!stale.exists());
    assert_eq!(read_back(&sink, "a/done.csv").await, b"x\n");
    running
        .commit()
        .await
        .expect("the running upload is untouched");
    assert_eq!(
        FilesystemSink::new(root.path().join("missing"))
            .remove_stale_parts(std::time::Duration::ZERO)
            .await
            .expect("nothing to clean"),
        0
    );
}

#[tokio::test]
async fn filesystem_commit_replaces_an_object_whole() {
    let root = TempDir::new("fs-replace");
    let sink = FilesystemSink::new(root.path());
    let mut first = sink.begin("k").await.expect("begin");
    first
        .write(Bytes::from_static(b"old contents"))
        .await
        .expect("write");
    first.commit().await.expect("commit");

    let mut second = sink.begin("k").await.expect("begin");
    second
        .write(Bytes::from_static(b"new"))
        .await
        .expect("write");
    assert_eq!(
        read_back(&sink, "k").await,
        b"old contents",
        "the old object until commit"
    );
    second.commit().await.expect("commit");
    assert_eq!(read_back(&sink, "k").await, b"new");

    let empty = sink.begin("empty").await.expect("begin");
    assert_eq!(empty.commit().await.expect("commit"), 0);
    assert_eq!(sink.size("empty").await.expect("size"), 0);
    assert_eq!(read_back(&sink, "empty").await, b"");
}

#[tokio::test]
async fn filesystem_refuses_keys_that_escape_the_root() {
    let root = TempDir::new("fs-hostile");
    let sink = FilesystemSink::new(root.path().join("assets"));
    let outside = root.path().join("outside.txt");
    std::fs::write(&outside, b"not an asset").expect("plant a file outside the root");
    let hostile = [
        "",
        "../outside.txt",
        "a/../../outside.txt",
        "a/..",
        "./a",
        "a/./b",
        "/etc/passwd",
        "//server/share",
        "a\\..\\..\\outside.txt",
        "C:\\Windows",
        "a\0b",
        "a/\nb",
        "a//b",
        "a/",
        ".hidden",
        "a/.content.csv.0011223344556677.part",
    ];
    for key in hostile {
        let begin = sink.begin(key).await.map(|_| ());
        let open = sink.open(key).await.map(|_| ());
        let size = sink.size(key).await.map(|_| ());
        let delete = sink.delete(key).await;
        for (operation, outcome) in [
            ("begin", begin),
            ("open", open),
            ("size", size),
            ("delete", delete),
        ] {
            match outcome {
                Err(SinkError::InvalidKey { key: refused, .. }) => assert_eq!(refused, key),
                other => panic!("{operation}({key:?}) must be refused, got {other:?}"),
            }
        }
    }
    assert_eq!(
        std::fs::read(&outside).expect("still there"),
        b"not an asset"
    );
    assert!(!root.path().join("assets").exists(), "nothing was created");

    let long = "a".repeat(1025);
    let error = validate_key(&long).expect_err("too long");
    assert_eq!(
        error.to_string(),
        format!("invalid object key {long:?}: it is longer than 1024 bytes")
    );
    for fine in [
        "content.csv",
        "alice_example.com/9f/content.parquet",
        "ünï/ça va/ok",
        "a-b_c.d/e",
    ] {
        validate_key(fine).unwrap_or_else(|error| panic!("{fine:?}: {error}"));
    }
}

#[test]
fn the_default_root_is_under_docket_data() {
    assert_eq!(
        FilesystemSink::default().root(),
        Path::new("./docket-data/assets")
    );
}
