//! The upstream cannot run on this machine: [`Unavailable`], and [`REQUIRE_VAR`], which turns
//! that into a failure.

use std::fmt;

/// The environment variable that makes an upstream that cannot be installed or started a
/// failure rather than a skip (`1` means required).
pub const REQUIRE_VAR: &str = "DOCKET_REQUIRE_FASTAPI";

/// The upstream cannot run on this machine (no `python3`, no `venv` module, or `pip install`
/// failed), or [`TestPki`](crate::certs::TestPki) cannot (no `openssl`), and [`REQUIRE_VAR`] is
/// not `1`: a test may skip, saying so.
#[derive(Debug, Clone)]
pub struct Unavailable {
    /// Why, for the notice.
    pub reason: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the FastAPI upstream for tests is unavailable: {} ({REQUIRE_VAR}=1 makes this a \
             failure)",
            self.reason
        )
    }
}

impl std::error::Error for Unavailable {}

/// Whether [`REQUIRE_VAR`] is `1`.
pub(crate) fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|value| value == "1")
}

/// Says on the terminal, past libtest's capture, that a test returned without running.
pub(crate) fn announce_skip(test_name: &str, unavailable: &Unavailable) {
    use std::io::Write as _;
    // Best effort: a notice that cannot be written changes no test's outcome.
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nnote: {test_name} did not run (it returns at once and counts as passed): \
         {unavailable}\n"
    );
}
