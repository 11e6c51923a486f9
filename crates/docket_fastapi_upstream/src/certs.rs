//! A throwaway PKI for TLS tests, made with the `openssl` command: a private CA, a server
//! certificate for `127.0.0.1` and `localhost`, and a client certificate with a given common
//! name, all signed by the CA, as PEM files in a temporary folder removed on drop.
//!
//! Keys are ECDSA P-256 in PKCS#8, which rustls, reqwest's `Identity::from_pem` and Python's
//! `ssl` all read.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context as _, bail};

use crate::config::TlsFiles;
use crate::tail::tail;
use crate::unavailable::{REQUIRE_VAR, Unavailable, announce_skip, required};

/// How long the client certificate of [`TestPki::generate`] is valid, in days from now.
pub const CLIENT_CERT_VALID_DAYS: u32 = 30;

/// How long the CA and the server certificate are valid, in days from now.
const SERVER_VALID_DAYS: u32 = 60;

/// The CA certificate's extensions (`openssl req -x509 -config`).
const CA_CONFIG: &str = "\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = Docket test CA
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
";

/// A configuration for the certificate requests, whose subject comes from `-subj`; so that
/// no system `openssl.cnf` is needed.
const REQUEST_CONFIG: &str = "\
[req]
distinguished_name = dn
[dn]
";

/// The server certificate's extensions (`openssl x509 -req -extfile`).
const SERVER_EXTENSIONS: &str = "\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
authorityKeyIdentifier = keyid
";

/// The client certificate's extensions.
const CLIENT_EXTENSIONS: &str = "\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
authorityKeyIdentifier = keyid
";

/// `openssl req`'s arguments for a new ECDSA P-256 key, unencrypted.
const NEW_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
];

/// Tells the temporary folders of one process apart.
static NEXT_DIR: AtomicU32 = AtomicU32::new(0);

/// A CA, a server certificate for `127.0.0.1`/`localhost` and a client certificate it signed,
/// as PEM files in [`dir`](Self::dir), which is removed when this is dropped.
///
/// `Debug` leaves the private keys out.
pub struct TestPki {
    /// The temporary folder holding every file.
    pub dir: PathBuf,
    /// The CA certificate, PEM: a client's only root, and the upstream's client CA.
    pub ca_pem: String,
    /// The CA certificate's file.
    pub ca_cert: PathBuf,
    /// The server certificate's file (subject alternative names `IP:127.0.0.1` and
    /// `DNS:localhost`).
    pub server_cert: PathBuf,
    /// The server's private key file.
    pub server_key: PathBuf,
    /// The client certificate, PEM.
    pub client_cert_pem: String,
    /// The client's private key, PEM (PKCS#8).
    pub client_key_pem: String,
    /// The client certificate's file.
    pub client_cert: PathBuf,
    /// The client's private key file.
    pub client_key: PathBuf,
    /// When the client certificate expires, RFC 3339 in UTC to the second
    /// (`2027-01-05T08:52:10Z`), as `openssl x509 -enddate` reports it.
    pub client_not_after: String,
}

impl fmt::Debug for TestPki {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestPki")
            .field("dir", &self.dir)
            .field("client_not_after", &self.client_not_after)
            .finish_non_exhaustive()
    }
}

impl Drop for TestPki {
    fn drop(&mut self) {
        // Best effort: a leftover folder in the temporary directory harms nothing.
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl TestPki {
    /// A new PKI whose client certificate names `client_common_name` and is valid for
    /// [`CLIENT_CERT_VALID_DAYS`].
    ///
    /// # Errors
    ///
    /// An [`Unavailable`] when `openssl` is not on the PATH and
    /// [`REQUIRE_VAR`] is not `1`; otherwise when `openssl` cannot be run
    /// or fails, or the temporary folder cannot be written.
    pub fn generate(client_common_name: &str) -> anyhow::Result<Self> {
        Self::generate_with(client_common_name, CLIENT_CERT_VALID_DAYS)
    }

    /// [`generate`](Self::generate), except that a missing `openssl` (an [`Unavailable`]) is
    /// said on the terminal and answered with `None`, so that the test named `test_name` can
    /// return early.
    ///
    /// # Errors
    ///
    /// As [`generate`](Self::generate), less [`Unavailable`].
    pub fn generate_or_skip(
        client_common_name: &str,
        test_name: &str,
    ) -> anyhow::Result<Option<Self>> {
        match Self::generate(client_common_name) {
            Ok(pki) => Ok(Some(pki)),
            Err(error) => match error.downcast::<Unavailable>() {
                Ok(unavailable) => {
                    announce_skip(test_name, &unavailable);
                    Ok(None)
                }
                Err(error) => Err(error),
            },
        }
    }

    /// As [`generate`](Self::generate), with a client certificate valid for
    /// `client_valid_days` days.
    ///
    /// # Errors
    ///
    /// As [`generate`](Self::generate); also for an empty common name or one with control
    /// characters, and for zero days.
    pub fn generate_with(client_common_name: &str, client_valid_days: u32) -> anyhow::Result<Self> {
        if client_common_name.is_empty() || client_common_name.chars().any(char::is_control) {
            bail!("a client common name must be non-empty, without control characters");
        }
        if client_valid_days == 0 {
            bail!("a client certificate must be valid for at least one day");
        }
        let dir = temporary_dir()?;
        // From here on the folder is owned by a value that removes it, whatever fails.
        let mut pki = Self {
            ca_cert: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            dir,
            ca_pem: String::new(),
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
            client_not_after: String::new(),
        };
        pki.fill(client_common_name, client_valid_days)?;
        Ok(pki)
    }

    fn fill(&mut self, client_common_name: &str, client_valid_days: u32) -> anyhow::Result<()> {
        let dir = self.dir.clone();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
            anyhow::Ok(path)
        };
        let ca_config = write("ca.cnf", CA_CONFIG)?;
        let request_config = write("request.cnf", REQUEST_CONFIG)?;
        let server_extensions = write("server.ext", SERVER_EXTENSIONS)?;
        let client_extensions = write("client.ext", CLIENT_EXTENSIONS)?;
        let ca_key = dir.join("ca.key");
        let serial = dir.join("ca.srl");

        run(openssl(&dir)
            .args(["req", "-x509", "-new", "-config"])
            .arg(&ca_config)
            .args(["-extensions", "ca"])
            .args(NEW_KEY)
            .arg("-keyout")
            .arg(&ca_key)
            .arg("-out")
            .arg(&self.ca_cert)
            .arg("-days")
            .arg(SERVER_VALID_DAYS.to_string()))?;
        let issue = |subject: &str, key: &Path, cert: &Path, extensions: &Path, days: u32| {
            let request = cert.with_extension("csr");
            run(openssl(&dir)
                .args(["req", "-new", "-config"])
                .arg(&request_config)
                .arg("-subj")
                .arg(subject)
                .args(NEW_KEY)
                .arg("-keyout")
                .arg(key)
                .arg("-out")
                .arg(&request))?;
            run(openssl(&dir)
                .args(["x509", "-req", "-in"])
                .arg(&request)
                .arg("-CA")
                .arg(&self.ca_cert)
                .arg("-CAkey")
                .arg(&ca_key)
                // Creates the serial file at the first certificate, and counts on from there.
                .args(["-CAcreateserial", "-CAserial"])
                .arg(&serial)
                .arg("-extfile")
                .arg(extensions)
                .arg("-out")
                .arg(cert)
                .arg("-days")
                .arg(days.to_string()))
        };
        issue(
            "/CN=127.0.0.1",
            &self.server_key,
            &self.server_cert,
            &server_extensions,
            SERVER_VALID_DAYS,
        )?;
        issue(
            &format!("/CN={}", escape_subject_value(client_common_name)),
            &self.client_key,
            &self.client_cert,
            &client_extensions,
            client_valid_days,
        )?;

        let read = |path: &Path| {
            fs::read_to_string(path).with_context(|| format!("read {}", path.display()))
        };
        self.ca_pem = read(&self.ca_cert)?;
        self.client_cert_pem = read(&self.client_cert)?;
        self.client_key_pem = read(&self.client_key)?;
        let end_date = run(openssl(&dir)
            .args(["x509", "-noout", "-enddate", "-in"])
            .arg(&self.client_cert))?;
        self.client_not_after = rfc3339_from_openssl(&end_date)?;
        Ok(())
    }

    /// The upstream's https with the server certificate, asking for no client certificate.
    pub fn server_tls(&self) -> TlsFiles {
        TlsFiles::new(&self.server_cert, &self.server_key)
    }

    /// The upstream's https with the server certificate, requiring a client certificate
    /// signed by this CA.
    pub fn mutual_tls(&self) -> TlsFiles {
        self.server_tls().client_ca(&self.ca_cert)
    }

    /// The client certificate followed by its key, one PEM text: what
    /// `reqwest::Identity::from_pem` reads.
    pub fn client_identity_pem(&self) -> String {
        format!("{}{}", self.client_cert_pem, self.client_key_pem)
    }
}

/// A new, empty folder of its own in the system's temporary directory, readable by its owner
/// only.
fn temporary_dir() -> anyhow::Result<PathBuf> {
    let base = std::env::temp_dir();
    loop {
        let candidate = base.join(format!(
            "docket-test-pki-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let mut builder = fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&candidate) {
            Ok(()) => return Ok(candidate),
            // Left by an earlier process with the same id: try the next name.
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                return Err(error).with_context(|| format!("create {}", candidate.display()));
            }
        }
    }
}

/// An `openssl` command that runs in `dir`.
fn openssl(dir: &Path) -> Command {
    let mut command = Command::new("openssl");
    command.current_dir(dir);
    command
}

/// Runs `command` and answers its standard output.
fn run(command: &mut Command) -> anyhow::Result<String> {
    let output = command.output().map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound if required() => anyhow::anyhow!(
            "{REQUIRE_VAR}=1 but openssl, which makes the test certificates, is not on the PATH"
        ),
        std::io::ErrorKind::NotFound => Unavailable {
            reason: "openssl, which makes the test certificates, is not on the PATH".to_owned(),
        }
        .into(),
        _ => anyhow::anyhow!("cannot run openssl: {error}"),
    })?;
    if !output.status.success() {
        let subcommand = command
            .get_args()
            .take(2)
            .map(|argument| argument.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        bail!(
            "`openssl {subcommand} …` failed ({}): {}",
            output.status,
            tail(&String::from_utf8_lossy(&output.stderr), 2000).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `value` for `openssl -subj`, where `/`, `+` and `\` have meanings of their own.
fn escape_subject_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for character in value.chars() {
        if matches!(character, '/' | '+' | '\\') {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

/// `notAfter=Jan  5 08:52:10 2027 GMT` (what `openssl x509 -enddate` prints in every version)
/// as `2027-01-05T08:52:10Z`.
fn rfc3339_from_openssl(line: &str) -> anyhow::Result<String> {
    let date = line.trim().strip_prefix("notAfter=").unwrap_or(line.trim());
    let parts: Vec<&str> = date.split_whitespace().collect();
    let [month, day, clock, year, "GMT"] = parts.as_slice() else {
        bail!("an end date openssl printed in an unexpected shape: {line:?}");
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS
        .iter()
        .position(|name| name == month)
        .with_context(|| format!("an unknown month in {line:?}"))?
        + 1;
    let day: u32 = day
        .parse()
        .with_context(|| format!("an unknown day in {line:?}"))?;
    let year: u32 = year
        .parse()
        .with_context(|| format!("an unknown year in {line:?}"))?;
    if clock.len() != 8 || clock.split(':').count() != 3 {
        bail!("an unknown time of day in {line:?}");
    }
    Ok(format!("{year:04}-{month:02}-{day:02}T{clock}Z"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_end_dates_become_rfc3339() {
        assert_eq!(
            rfc3339_from_openssl("notAfter=Jan  5 08:52:10 2027 GMT\n").expect("parses"),
            "2027-01-05T08:52:10Z"
        );
        assert_eq!(
            rfc3339_from_openssl("notAfter=Dec 31 23:59:59 2030 GMT").expect("parses"),
            "2030-12-31T23:59:59Z"
        );
        assert!(rfc3339_from_openssl("notAfter=2027-01-05 08:52:10Z").is_err());
    }

    #[test]
    fn subject_values_are_escaped_for_openssl() {
        assert_eq!(escape_subject_value("a/b+c\\d"), "a\\/b\\+c\\\\d");
        assert_eq!(escape_subject_value("alice-agent"), "alice-agent");
    }
}
