//! `scrub_statement`: the shape of a statement, never its values, at most 2 KiB.

use docket_telemetry::{MAX_STATEMENT_BYTES, scrub_statement};

#[test]
fn literals_become_placeholders_and_the_shape_stays() {
    for (sql, scrubbed) in [
        (
            "SELECT name FROM users WHERE email = 'alice@example.com' AND age > 42",
            "SELECT name FROM users WHERE email = ? AND age > ?",
        ),
        (
            "select * from t where a = 'it''s' and b = E'x\\'y' and c = X'ff'",
            "select * from t where a = ? and b = ? and c = ?",
        ),
        (
            "SELECT \"Order Id\", col_2 FROM s3.t2 WHERE x IN (1, 2.5, -3e10, .5)",
            "SELECT \"Order Id\", col_2 FROM s3.t2 WHERE x IN (?, ?, -?, ?)",
        ),
        (
            "SELECT $$secret$$, $tag$more$tag$, $1 -- the key is hunter2\nFROM t /* token=abc */ LIMIT 10",
            "SELECT ?, ?, $1 FROM t LIMIT ?",
        ),
        ("SELECT 'unterminated FROM t", "SELECT ?"),
    ] {
        assert_eq!(scrub_statement(sql), scrubbed, "{sql}");
    }
}

#[test]
fn a_long_statement_is_cut_at_two_kibibytes_on_a_character_boundary() {
    let sql = format!("SELECT {} FROM t", "é_column, ".repeat(1000));
    let scrubbed = scrub_statement(&sql);
    assert!(scrubbed.len() <= MAX_STATEMENT_BYTES, "{}", scrubbed.len());
    assert!(scrubbed.ends_with("..."));
    assert!(scrubbed.starts_with("SELECT é_column, é_column,"));
    let values = format!(
        "INSERT INTO t VALUES {}",
        "('a secret', 12345), ".repeat(500)
    );
    let scrubbed = scrub_statement(&values);
    assert!(scrubbed.len() <= MAX_STATEMENT_BYTES);
    assert!(!scrubbed.contains("secret") && !scrubbed.contains("12345"));
}
