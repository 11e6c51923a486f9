//! What the upstream is started with: whether it requires bearer JWTs, and whether it serves
//! https (and requires client certificates). Turned into `app.py`'s flags.

use std::ffi::OsString;
use std::path::PathBuf;

/// How the upstream is started. [`UpstreamConfig::new`] is plain http without credentials.
///
/// Built with [`UpstreamConfig::new`] and the chained setters, or by filling the fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Require `Authorization: Bearer <JWT>` on every route but `/openapi.json`.
    pub jwt: Option<JwtCheck>,
    /// Serve https with these files.
    pub tls: Option<TlsFiles>,
}

impl UpstreamConfig {
    /// Plain http, no credentials required.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requires bearer JWTs, checked as `check` says.
    #[must_use]
    pub fn jwt(mut self, check: JwtCheck) -> Self {
        self.jwt = Some(check);
        self
    }

    /// Serves https with `files`.
    #[must_use]
    pub fn tls(mut self, files: TlsFiles) -> Self {
        self.tls = Some(files);
        self
    }

    /// `app.py`'s flags for this configuration. Paths are made absolute, since the app runs
    /// in its install folder.
    pub(crate) fn arguments(&self) -> std::io::Result<Vec<OsString>> {
        let mut arguments: Vec<OsString> = Vec::new();
        if let Some(check) = &self.jwt {
            arguments.extend(
                [
                    "--require-jwt",
                    "--issuer",
                    &check.issuer,
                    "--audience",
                    &check.audience,
                ]
                .map(OsString::from),
            );
        }
        if let Some(files) = &self.tls {
            arguments.push("--tls-cert".into());
            arguments.push(std::path::absolute(&files.cert)?.into());
            arguments.push("--tls-key".into());
            arguments.push(std::path::absolute(&files.key)?.into());
            if let Some(client_ca) = &files.client_ca {
                arguments.push("--client-ca".into());
                arguments.push(std::path::absolute(client_ca)?.into());
            }
        }
        Ok(arguments)
    }
}

/// How bearer JWTs are checked: RS256, signed with a key of the JWKS that the issuer's
/// discovery document (`{issuer}/.well-known/openid-configuration`) names, `iss` the issuer,
/// `aud` the audience, `exp` not passed. Anything else is answered 401.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtCheck {
    /// The issuer, exactly as its tokens' `iss` says (for example
    /// `docket_oidc_provider::OidcProvider::issuer`). Its discovery document is read when the
    /// upstream starts, so the issuer must already run.
    pub issuer: String,
    /// The audience tokens must carry in `aud` (a resource indicator of the provider).
    pub audience: String,
}

impl JwtCheck {
    /// Tokens of `issuer` for `audience`.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
        }
    }
}

/// The upstream's https: its certificate and key (PEM), and the CA whose certificates a client
/// must present (`None`: no client certificate asked for). A client without such a certificate
/// is refused in the TLS handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server certificate, PEM.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
    /// The CA that signs the client certificates it accepts, PEM.
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    /// https with `cert` and `key`, without client certificates.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
        }
    }

    /// Requires client certificates signed by the CA in `ca`.
    #[must_use]
    pub fn client_ca(mut self, ca: impl Into<PathBuf>) -> Self {
        self.client_ca = Some(ca.into());
        self
    }
}
