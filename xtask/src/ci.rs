//! `cargo xtask ci`: the static checks CI runs besides the tests.
//!
//! Every step runs even when an earlier one fails, so one CI run reports every kind
//! of problem at once; the command fails if any step did.

use anyhow::bail;

use crate::{package, tidy, util};

pub(crate) fn run() -> anyhow::Result<()> {
    let mut failed: Vec<&str> = Vec::new();

    util::section("rustfmt");
    report(
        &mut failed,
        "rustfmt",
        util::run(util::cargo().args(["fmt", "--all", "--check"])),
    );

    util::section("clippy");
    report(
        &mut failed,
        "clippy",
        util::run(util::cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])),
    );

    util::section("tidy");
    report(&mut failed, "tidy", tidy::run());

    // The workspace builds docket_storage with both backends; an embedder may build one.
    util::section("docket_storage with one backend");
    report(
        &mut failed,
        "docket_storage with one backend",
        storage_backends(),
    );

    // Broken intra-doc links, unclosed HTML tags in prose and the like fail here
    // (STYLE.md 14: the crate docs are part of the product).
    util::section("rustdoc");
    report(
        &mut failed,
        "rustdoc",
        util::run(
            util::cargo()
                .args(["doc", "--workspace", "--no-deps"])
                .env("RUSTDOCFLAGS", "-D warnings"),
        ),
    );

    // `cargo xtask test` runs `--all-targets`, which leaves doctests out; the README
    // examples each library crate shows as its documentation run here.
    util::section("doctests");
    report(
        &mut failed,
        "doctests",
        util::run(util::cargo().args(["test", "--workspace", "--doc"])),
    );

    util::section("cargo package");
    report(&mut failed, "cargo package", package::run());

    util::section("cargo deny");
    if cargo_deny_installed() {
        // `advisories` is left out on purpose: it downloads the advisory database from
        // a code host, and CI here reaches package registries only. The inclusion graphs
        // would print a dependency tree per duplicated crate; `cargo tree -i CRATE` shows
        // the one that matters.
        report(
            &mut failed,
            "cargo deny",
            util::run(util::cargo().args([
                "deny",
                "check",
                "--hide-inclusion-graph",
                "bans",
                "licenses",
                "sources",
            ])),
        );
    } else {
        println!("skipped: cargo-deny is not installed (`cargo install cargo-deny` to run it)");
    }

    if !failed.is_empty() {
        bail!("ci failed: {}", failed.join(", "));
    }
    println!("\nci: all checks passed");
    Ok(())
}

/// docket_storage with only its `sqlite` feature, then only its `postgres` feature:
/// each builds without warnings (the `testing` harness too), and the other
/// backend's driver is not in its dependency tree.
fn storage_backends() -> anyhow::Result<()> {
    for (feature, absent) in [("sqlite", "tokio-postgres"), ("postgres", "libsqlite3-sys")] {
        let features = format!("{feature},testing");
        let only = [
            "-p",
            "docket_storage",
            "--no-default-features",
            "--features",
        ];
        util::run(util::cargo().arg("clippy").args(only).args([
            features.as_str(),
            "--",
            "-D",
            "warnings",
        ]))?;
        let tree = util::output(util::cargo().arg("tree").args(only).args([
            features.as_str(),
            "-e",
            "normal",
            "--prefix",
            "none",
        ]))?;
        if tree
            .lines()
            .any(|line| line.starts_with(&format!("{absent} ")))
        {
            bail!("docket_storage with only `{feature}` still depends on {absent}");
        }
        println!("docket_storage with only `{feature}`: builds, and {absent} is not linked");
    }
    Ok(())
}

fn report<'a>(failed: &mut Vec<&'a str>, step: &'a str, outcome: anyhow::Result<()>) {
    if let Err(error) = outcome {
        eprintln!("{step} failed: {error:#}");
        failed.push(step);
    }
}

fn cargo_deny_installed() -> bool {
    util::cargo()
        .args(["deny", "--version"])
        .output()
        .is_ok_and(|output| output.status.success())
}
