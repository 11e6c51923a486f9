//! The S3 sink against a real S3-compatible server: `s3s-fs`, which checks SigV4
//! signatures, started by each test on a free port.
//!
//! The binary is found through `DOCKET_S3S_FS`, then at `target/s3s-fs/bin/s3s-fs`
//! (where `.ci/run` installs it), then on `PATH`. When it is missing a test returns at
//! once, and libtest counts it as passed: so the tests say so on the terminal (past
//! libtest's capture), and every name ends `on_s3s_fs`, which `cargo xtask test` filters
//! out when it finds no binary. With `DOCKET_REQUIRE_S3=1` (CI, and `cargo xtask test`
//! when it found one) a missing server is a failure, and so it is with
//! `DOCKET_S3_CASES_FILTERED=1` (`cargo xtask test` filtered the cases out, so one that
//! still runs has a name that does not say what it needs).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use docket_export::sink::{ObjectSink, S3Config, S3Sink, SinkError};

use super::{TempDir, pattern, read_back, read_from};

const BUCKET: &str = "docket-assets";
const ACCESS_KEY: &str = "docket-test-key";
const SECRET_KEY: &str = "docket-test-secret";
const MIB: usize = 1024 * 1024;

/// A running s3s-fs, killed on drop.
struct S3Server {
    child: Child,
    address: SocketAddr,
    data: TempDir,
}

impl S3Server {
    /// Starts a server with an empty bucket, or returns `None` (after saying why) when
    /// the binary is missing and not required.
    fn start(label: &str) -> Option<Self> {
        let Some(binary) = find_binary() else {
            let flag = |name: &str| std::env::var(name).is_ok_and(|value| value == "1");
            assert!(
                !flag("DOCKET_REQUIRE_S3"),
                "DOCKET_REQUIRE_S3=1 but no s3s-fs binary was found (set DOCKET_S3S_FS, or \
                 install it: cargo install s3s-fs --version 0.14.1 --features binary --locked \
                 --root target/s3s-fs)"
            );
            assert!(
                !flag("DOCKET_S3_CASES_FILTERED"),
                "{label} needs s3s-fs, which is missing; `cargo xtask test` filtered out the \
                 cases whose names contain `on_s3s_fs`, and this one's name does not"
            );
            announce_missing();
            return None;
        };
        let data = TempDir::new(&format!("s3-{label}"));
        std::fs::create_dir_all(data.path().join(BUCKET)).expect("create the bucket");
        // A port is picked by binding port 0 and releasing it; another process could
        // take it in between, so a server that does not come up is retried.
        for _ in 0..3 {
            let address = free_address();
            let mut child = Command::new(&binary)
                .args(["--host", "127.0.0.1", "--port", &address.port().to_string()])
                .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
                .arg(data.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|error| panic!("start {}: {error}", binary.display()));
            if wait_until_listening(&mut child, address) {
                return Some(Self {
                    child,
                    address,
                    data,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("s3s-fs did not start listening within 3 tries");
    }

    fn config(&self) -> S3Config {
        S3Config {
            endpoint: Some(format!("http://{}", self.address)),
            access_key_id: Some(ACCESS_KEY.to_owned()),
            secret_access_key: Some(SECRET_KEY.to_owned()),
            allow_http: true,
            ..S3Config::new(BUCKET)
        }
    }

    fn sink(&self) -> S3Sink {
        S3Sink::new(&self.config()).expect("a valid configuration")
    }

    /// Where s3s-fs keeps an object's bytes on disk.
    fn file_of(&self, location: &str) -> PathBuf {
        self.data.path().join(BUCKET).join(location)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Says once per test binary, on the terminal rather than through libtest's capture
/// (which shows a passing test's output to nobody), that the S3 cases did not run.
fn announce_missing() {
    use std::io::Write as _;
    static ANNOUNCED: std::sync::Once = std::sync::Once::new();
    ANNOUNCED.call_once(|| {
        // Best effort: a notice that cannot be written changes no test's outcome.
        let _ = writeln!(
            std::io::stderr().lock(),
            "\nnote: no s3s-fs binary (DOCKET_S3S_FS, target/s3s-fs/bin/s3s-fs, or the PATH): \
             the S3 sink cases return at once and are counted as passed although they did not \
             run. `cargo xtask test` filters them out instead; DOCKET_REQUIRE_S3=1 makes this a \
             failure.\n"
        );
    });
}

fn find_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("DOCKET_S3S_FS") {
        return Some(PathBuf::from(path)).filter(|path| path.is_file());
    }
    let installed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/s3s-fs/bin/s3s-fs");
    if installed.is_file() {
        return Some(installed);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|folder| folder.join("s3s-fs"))
        .find(|path| path.is_file())
}

fn free_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
}

fn wait_until_listening(child: &mut Child, address: SocketAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_multipart_upload_is_invisible_until_commit_then_reads_back_and_deletes_on_s3s_fs() {
    let Some(server) = S3Server::start("multipart") else {
        return;
    };
    let sink = server.sink();
    let key = "alice/9f00e2/content.parquet";
    let data = pattern(12 * MIB + 12_345, 3);

    let mut upload = sink.begin(key).await.expect("begin");
    for chunk in data.chunks(MIB) {
        upload
            .write(Bytes::copy_from_slice(chunk))
            .await
            .expect("write");
    }
    assert_eq!(upload.bytes_written(), data.len() as u64);
    // Two 5 MiB parts have been sent by now; still nothing is visible.
    assert!(matches!(
        sink.size(key).await,
        Err(SinkError::NotFound { .. })
    ));
    assert!(matches!(
        sink.open(key).await,
        Err(SinkError::NotFound { .. })
    ));
    assert!(!server.file_of(key).exists());

    assert_eq!(upload.commit().await.expect("commit"), data.len() as u64);
    assert_eq!(sink.size(key).await.expect("size"), data.len() as u64);
    assert!(
        read_back(&sink, key).await == data,
        "the bytes read back are the bytes written"
    );

    sink.delete(key).await.expect("delete");
    assert!(matches!(
        sink.size(key).await,
        Err(SinkError::NotFound { .. })
    ));
    sink.delete(key).await.expect("deleting again succeeds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_open_at_reads_a_range_from_an_offset_on_s3s_fs() {
    let Some(server) = S3Server::start("open-at") else {
        return;
    };
    let sink = server.sink();
    let data = pattern(300_000, 9);
    let mut upload = sink.begin("a/content.jsonl").await.expect("begin");
    upload
        .write(Bytes::copy_from_slice(&data))
        .await
        .expect("write");
    upload.commit().await.expect("commit");

    for start in [0_u64, 1, 123_456, 299_999] {
        assert!(
            read_from(&sink, "a/content.jsonl", start).await == data[start as usize..],
            "from {start}"
        );
    }
    for past in [300_000_u64, 300_001] {
        assert_eq!(
            read_from(&sink, "a/content.jsonl", past).await,
            b"",
            "from {past}"
        );
    }
    let empty = sink.begin("a/empty").await.expect("begin");
    empty.commit().await.expect("commit");
    assert_eq!(read_from(&sink, "a/empty", 0).await, b"");
    assert_eq!(read_from(&sink, "a/empty", 5).await, b"");
    assert!(matches!(
        sink.open_at("a/missing", 7).await,
        Err(SinkError::NotFound { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_abort_and_drop_leave_nothing_on_s3s_fs() {
    let Some(server) = S3Server::start("abort") else {
        return;
    };
    let sink = server.sink();

    // A multipart upload, aborted.
    let mut upload = sink.begin("big/aborted.csv").await.expect("begin");
    for chunk in pattern(7 * MIB, 1).chunks(MIB) {
        upload
            .write(Bytes::copy_from_slice(chunk))
            .await
            .expect("write");
    }
    upload.abort().await.expect("abort");
    assert!(matches!(
        sink.size("big/aborted.csv").await,
        Err(SinkError::NotFound { .. })
    ));

    // A multipart upload, dropped (a cancelled export).
    let mut upload = sink.begin("big/dropped.csv").await.expect("begin");
    for chunk in pattern(6 * MIB, 2).chunks(MIB) {
        upload
            .write(Bytes::copy_from_slice(chunk))
            .await
            .expect("write");
    }
    drop(upload);
    assert!(matches!(
        sink.size("big/dropped.csv").await,
        Err(SinkError::NotFound { .. })
    ));

    // A small upload (still buffered), aborted and dropped.
    let mut upload = sink.begin("small/aborted.csv").await.expect("begin");
    upload
        .write(Bytes::from_static(b"a,b\n1,2\n"))
        .await
        .expect("write");
    upload.abort().await.expect("abort");
    let mut upload = sink.begin("small/dropped.csv").await.expect("begin");
    upload
        .write(Bytes::from_static(b"a,b\n1,2\n"))
        .await
        .expect("write");
    drop(upload);
    for key in ["small/aborted.csv", "small/dropped.csv"] {
        assert!(
            matches!(sink.open(key).await, Err(SinkError::NotFound { .. })),
            "{key}"
        );
    }
    for key in [
        "big/aborted.csv",
        "big/dropped.csv",
        "small/aborted.csv",
        "small/dropped.csv",
    ] {
        assert!(!server.file_of(key).exists(), "{key}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_small_and_empty_objects_land_under_the_prefix_on_s3s_fs() {
    let Some(server) = S3Server::start("small") else {
        return;
    };
    let sink = S3Sink::new(&S3Config {
        prefix: "/exports/v1/".to_owned(),
        ..server.config()
    })
    .expect("a valid configuration");

    let mut upload = sink.begin("bob/1/content.jsonl").await.expect("begin");
    upload
        .write(Bytes::from_static(b"{\"a\":1}\n"))
        .await
        .expect("write");
    upload
        .write(Bytes::from_static(b"{\"a\":2}\n"))
        .await
        .expect("write");
    assert!(matches!(
        sink.size("bob/1/content.jsonl").await,
        Err(SinkError::NotFound { .. })
    ));
    upload.commit().await.expect("commit");
    assert_eq!(
        read_back(&sink, "bob/1/content.jsonl").await,
        b"{\"a\":1}\n{\"a\":2}\n"
    );
    assert_eq!(
        std::fs::read(server.file_of("exports/v1/bob/1/content.jsonl"))
            .expect("stored under the prefix"),
        b"{\"a\":1}\n{\"a\":2}\n"
    );

    let empty = sink.begin("bob/2/content.csv").await.expect("begin");
    assert_eq!(empty.commit().await.expect("commit"), 0);
    assert_eq!(sink.size("bob/2/content.csv").await.expect("size"), 0);
    assert_eq!(read_back(&sink, "bob/2/content.csv").await, b"");

    for hostile in ["../escape", "/abs", "a//b", "a\\b", ".hidden"] {
        assert!(
            matches!(sink.begin(hostile).await, Err(SinkError::InvalidKey { .. })),
            "{hostile}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_requests_with_a_wrong_secret_are_refused_on_s3s_fs() {
    let Some(server) = S3Server::start("auth") else {
        return;
    };
    let sink = S3Sink::new(&S3Config {
        secret_access_key: Some("not-the-secret".to_owned()),
        ..server.config()
    })
    .expect("a valid configuration");
    let mut upload = sink.begin("k").await.expect("begin");
    upload
        .write(Bytes::from_static(b"data"))
        .await
        .expect("buffered");
    let error = upload
        .commit()
        .await
        .expect_err("the signature does not verify");
    assert!(
        matches!(
            error,
            SinkError::Store {
                operation: "commit",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(matches!(
        server.sink().size("k").await,
        Err(SinkError::NotFound { .. })
    ));
}

#[test]
fn s3_configuration_is_checked_and_its_debug_hides_secrets() {
    let config = S3Config {
        endpoint: Some("http://127.0.0.1:9".to_owned()),
        access_key_id: Some("AKIAEXAMPLE".to_owned()),
        secret_access_key: Some("wJalrXUtnFEMI/K7MDENG".to_owned()),
        ..S3Config::new("bucket")
    };
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("AKIAEXAMPLE") && !shown.contains("wJalrXUtnFEMI"),
        "{shown}"
    );
    assert!(
        shown.contains("<redacted>") && shown.contains("bucket"),
        "{shown}"
    );

    let half = S3Config {
        secret_access_key: None,
        ..config.clone()
    };
    let error = S3Sink::new(&half).expect_err("a key id without a secret");
    assert_eq!(
        error.to_string(),
        "invalid object storage configuration: access_key_id and secret_access_key must be \
         given together"
    );
    let bad_prefix = S3Config {
        prefix: "a/../b".to_owned(),
        ..config.clone()
    };
    assert!(matches!(
        S3Sink::new(&bad_prefix),
        Err(SinkError::Config { .. })
    ));
    assert!(matches!(
        S3Sink::new(&S3Config::new("")),
        Err(SinkError::Config { .. })
    ));

    let parsed: S3Config = serde_json::from_value(serde_json::json!({
        "bucket": "assets",
        "endpoint": "http://127.0.0.1:9000",
        "allow_http": true
    }))
    .expect("parses with defaults");
    assert_eq!(parsed.region, "us-east-1");
    assert_eq!(parsed.prefix, "");
    assert!(
        serde_json::from_value::<S3Config>(serde_json::json!({"bucket": "b", "secret": "x"}))
            .is_err()
    );
}
