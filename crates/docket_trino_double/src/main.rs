//! `docket_trino_double --listen ADDR`: the Trino double as a process, for clients
//! that are not Rust tests (the official Python client in CI, benchmarks, a person
//! poking at it with `curl`). It prints `listening on http://ADDR` once bound and
//! serves until it is killed or interrupted. With `--access-control-rules`, it
//! enforces the `impersonation` rules of a Trino `rules.json` on principals that
//! authenticate with `Authorization: Basic` (any password).

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use docket_trino_double::{AccessControlRules, TrinoDouble};

const USAGE: &str = "\
usage: docket_trino_double [--listen ADDR] [--page-rows N] [--page-delay-ms N]
                           [--access-control-rules FILE]

  --listen ADDR       address to bind (default 127.0.0.1:8080; port 0 picks a free one)
  --page-rows N       rows per page at most (default 4096)
  --page-delay-ms N   wait before answering each page of a running query (default 0)
  --access-control-rules FILE
                      enforce the `impersonation` rules of this Trino rules.json on
                      principals authenticated with Basic credentials (any password);
                      without it, anyone may run queries as anyone
";

struct Options {
    listen: SocketAddr,
    page_rows: Option<usize>,
    page_delay: Option<Duration>,
    access_control: Option<AccessControlRules>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
        page_rows: None,
        page_delay: None,
        access_control: None,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        if matches!(flag, "-h" | "--help") {
            return Err(String::new());
        }
        let value = match inline.or_else(|| args.next().cloned()) {
            Some(value) => value,
            None => return Err(format!("`{flag}` needs a value")),
        };
        let invalid = || format!("`{flag}` got `{value}`, which is not valid");
        match flag {
            "--listen" => options.listen = value.parse().map_err(|_| invalid())?,
            "--page-rows" => options.page_rows = Some(value.parse().map_err(|_| invalid())?),
            "--page-delay-ms" => {
                let millis = value.parse().map_err(|_| invalid())?;
                options.page_delay = Some(Duration::from_millis(millis));
            }
            "--access-control-rules" => {
                let text = std::fs::read_to_string(&value)
                    .map_err(|error| format!("`{flag}`: could not read `{value}`: {error}"))?;
                let rules = AccessControlRules::from_json(&text)
                    .map_err(|error| format!("`{flag}`: `{value}`: {error}"))?;
                options.access_control = Some(rules);
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(options)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("error: {message}\n\n{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    let double = match TrinoDouble::start_on(options.listen).await {
        Ok(double) => double,
        Err(error) => {
            eprintln!("error: could not bind {}: {error}", options.listen);
            return ExitCode::FAILURE;
        }
    };
    if let Some(rows) = options.page_rows {
        double.set_page_rows(rows);
    }
    if let Some(delay) = options.page_delay {
        double.set_page_delay(delay);
    }
    if let Some(rules) = options.access_control {
        double.set_access_control(Some(rules));
    }
    // Whoever started the process waits for this line to learn the address.
    println!("listening on {}", double.url());
    let _ = std::io::stdout().flush();
    match tokio::signal::ctrl_c().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: could not wait for Ctrl-C: {error}");
            ExitCode::FAILURE
        }
    }
}
