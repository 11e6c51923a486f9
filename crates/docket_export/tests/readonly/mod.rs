//! `check_read_only`: which statements pass, which are refused and with what message,
//! including hostile inputs (comments hiding a statement, unicode, very long input).

use docket_export::readonly::{
    MAX_SQL_BYTES, ReadOnlyError, ReadOnlyRules, StatementKind, check_read_only,
    check_read_only_with,
};

#[test]
fn reads_are_accepted_with_their_kind() {
    let cases: &[(&str, StatementKind)] = &[
        ("SELECT 1", StatementKind::Select),
        (
            "select * from tpch.tiny.nation where n_regionkey = 1",
            StatementKind::Select,
        ),
        (
            "SELECT a, count(*) FROM t GROUP BY a HAVING count(*) > 1 ORDER BY 2 DESC LIMIT 10",
            StatementKind::Select,
        ),
        (
            "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
            StatementKind::Select,
        ),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r",
            StatementKind::Select,
        ),
        (
            "SELECT 1 UNION SELECT 2 EXCEPT SELECT 3",
            StatementKind::Select,
        ),
        ("(SELECT 1)", StatementKind::Select),
        (
            "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS t(id, name)",
            StatementKind::Select,
        ),
        (
            "SELECT * FROM t WHERE id IN (SELECT id FROM u)",
            StatementKind::Select,
        ),
        (
            "SELECT CAST(x AS varchar), ARRAY[1, 2], transform(ARRAY[1], v -> v + 1) FROM t",
            StatementKind::Select,
        ),
        (
            "SELECT * FROM t OFFSET 10 ROWS FETCH FIRST 5 ROWS ONLY",
            StatementKind::Select,
        ),
        (
            "SELECT DATE '2024-01-31', TIMESTAMP '2024-01-31 12:00:00', INTERVAL '1' DAY",
            StatementKind::Select,
        ),
        (
            "SELECT \"weird ; name\" FROM \"catalog\".\"schema\".\"table\"",
            StatementKind::Select,
        ),
        (
            "SELECT 'a;b' AS semicolon_in_a_string",
            StatementKind::Select,
        ),
        (
            "SELECT 'it''s' -- a comment; DROP TABLE t\n",
            StatementKind::Select,
        ),
        (
            "/* leading comment; DELETE FROM t */ SELECT 1",
            StatementKind::Select,
        ),
        ("SELECT 'ünïcödé ✓ 日本語' AS \"列\"", StatementKind::Select),
        ("VALUES (1, 'a'), (2, 'b')", StatementKind::Values),
        ("SHOW CATALOGS", StatementKind::Show),
        ("SHOW SCHEMAS FROM tpch", StatementKind::Show),
        ("SHOW TABLES FROM tpch.tiny", StatementKind::Show),
        ("SHOW TABLES FROM tpch.tiny LIKE 'n%'", StatementKind::Show),
        ("SHOW COLUMNS FROM tpch.tiny.nation", StatementKind::Show),
        ("SHOW CREATE TABLE tpch.tiny.nation", StatementKind::Show),
        ("SHOW CREATE VIEW v", StatementKind::Show),
        ("SHOW FUNCTIONS", StatementKind::Show),
        ("SHOW SESSION", StatementKind::Show),
        ("SHOW STATS FOR tpch.tiny.nation", StatementKind::Show),
        ("TABLE tpch.tiny.nation", StatementKind::Select),
        ("table nation;", StatementKind::Select),
        (
            "SELECT * FROM t TABLESAMPLE BERNOULLI (10) CROSS JOIN UNNEST(ARRAY[1, 2]) AS x(v)",
            StatementKind::Select,
        ),
        ("DESCRIBE tpch.tiny.nation", StatementKind::Describe),
        ("DESC nation", StatementKind::Describe),
        ("EXPLAIN SELECT * FROM t", StatementKind::Explain),
        (
            "EXPLAIN ANALYZE SELECT count(*) FROM t",
            StatementKind::Explain,
        ),
        (
            "EXPLAIN (TYPE DISTRIBUTED, FORMAT JSON) SELECT 1",
            StatementKind::Explain,
        ),
        ("EXPLAIN ANALYZE VERBOSE SELECT 1", StatementKind::Explain),
        (
            "EXPLAIN WITH x AS (SELECT 1) SELECT * FROM x",
            StatementKind::Explain,
        ),
        ("SELECT 1;", StatementKind::Select),
        ("  SELECT 1 ;  -- trailing comment\n", StatementKind::Select),
    ];
    let mut failures = Vec::new();
    for (sql, expected) in cases {
        match check_read_only(sql) {
            Ok(statement) if statement.kind() == *expected => {}
            Ok(statement) => failures.push(format!(
                "{sql:?}: kind {:?}, expected {expected:?}",
                statement.kind()
            )),
            Err(error) => failures.push(format!("{sql:?}: refused: {error}")),
        }
    }
    assert!(
        failures.is_empty(),
        "accepted reads failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn explain_analyze_is_reported() {
    let plain = check_read_only("EXPLAIN SELECT 1").expect("explain");
    assert!(!plain.explain_analyze());
    let analyze = check_read_only("EXPLAIN ANALYZE SELECT 1").expect("explain analyze");
    assert_eq!(analyze.kind(), StatementKind::Explain);
    assert!(analyze.explain_analyze());
}

#[test]
fn one_trailing_semicolon_is_stripped_and_comments_kept() {
    let cases = [
        ("SELECT 1;", "SELECT 1"),
        ("  SELECT 1 ;  ", "SELECT 1"),
        ("SELECT 1; -- done\n", "SELECT 1"),
        ("-- why\nSELECT 'a;b' ;", "-- why\nSELECT 'a;b'"),
        ("SELECT '日本;' ;", "SELECT '日本;'"),
        ("SELECT\n  1\n;\n", "SELECT\n  1"),
        ("SELECT 1 -- no semicolon", "SELECT 1 -- no semicolon"),
    ];
    for (sql, expected) in cases {
        let statement = check_read_only(sql).unwrap_or_else(|error| panic!("{sql:?}: {error}"));
        assert_eq!(statement.sql(), expected, "for {sql:?}");
    }
}

/// What a refusal must say: the variant's shape and a fragment of its message.
enum Expect {
    Empty,
    Syntax(&'static str),
    Multiple(usize),
    NotReadOnly(&'static str),
    AmbiguousComment,
}

#[test]
fn everything_else_is_refused_with_a_reason() {
    let cases: &[(&str, Expect)] = &[
        ("", Expect::Empty),
        ("   \n\t ", Expect::Empty),
        ("-- only a comment", Expect::Empty),
        ("/* only a comment */", Expect::Empty),
        (";", Expect::Empty),
        ("SELECT 1; SELECT 2", Expect::Multiple(2)),
        ("SELECT 1; DROP TABLE t;", Expect::Multiple(2)),
        ("SELECT 1;;", Expect::Syntax("empty statement")),
        (
            "SELECT 1 /* a comment */; DELETE FROM t",
            Expect::Multiple(2),
        ),
        ("SELECT 1 -- comment\n; DELETE FROM t", Expect::Multiple(2)),
        ("SELECT 'a'';'; DELETE FROM t", Expect::Multiple(2)),
        ("INSERT INTO t VALUES (1)", Expect::NotReadOnly("INSERT")),
        (
            "insert into t select * from u",
            Expect::NotReadOnly("INSERT"),
        ),
        ("UPDATE t SET a = 1", Expect::NotReadOnly("UPDATE")),
        ("DELETE FROM t WHERE a = 1", Expect::NotReadOnly("DELETE")),
        (
            "MERGE INTO t USING u ON t.id = u.id WHEN MATCHED THEN DELETE",
            Expect::NotReadOnly("MERGE"),
        ),
        (
            "CREATE TABLE t (a int)",
            Expect::NotReadOnly("CREATE TABLE"),
        ),
        (
            "CREATE TABLE t AS SELECT 1 AS a",
            Expect::NotReadOnly("CREATE TABLE"),
        ),
        (
            "CREATE VIEW v AS SELECT 1",
            Expect::NotReadOnly("CREATE VIEW"),
        ),
        ("DROP TABLE t", Expect::NotReadOnly("DROP TABLE")),
        (
            "ALTER TABLE t ADD COLUMN b int",
            Expect::NotReadOnly("ALTER TABLE"),
        ),
        ("TRUNCATE TABLE t", Expect::NotReadOnly("TRUNCATE")),
        (
            "CALL system.sync_partition_metadata('s', 't', 'FULL')",
            Expect::NotReadOnly("CALL"),
        ),
        ("GRANT SELECT ON t TO alice", Expect::NotReadOnly("GRANT")),
        (
            "REVOKE SELECT ON t FROM alice",
            Expect::NotReadOnly("REVOKE"),
        ),
        (
            "SET SESSION query_max_run_time = '1h'",
            Expect::NotReadOnly("not allowed"),
        ),
        ("USE tpch.tiny", Expect::NotReadOnly("USE")),
        (
            "START TRANSACTION",
            Expect::NotReadOnly("START TRANSACTION"),
        ),
        ("COMMIT", Expect::NotReadOnly("COMMIT")),
        ("ROLLBACK", Expect::NotReadOnly("ROLLBACK")),
        (
            "SELECT * INTO backup FROM t",
            Expect::NotReadOnly("SELECT … INTO"),
        ),
        (
            "SELECT * FROM t FOR UPDATE",
            Expect::NotReadOnly("locking clause"),
        ),
        (
            "WITH gone AS (DELETE FROM t RETURNING *) SELECT * FROM gone",
            Expect::NotReadOnly("nested"),
        ),
        (
            "WITH moved AS (INSERT INTO u SELECT * FROM t RETURNING *) SELECT count(*) FROM moved",
            Expect::NotReadOnly("nested"),
        ),
        (
            "WITH up AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM up",
            Expect::NotReadOnly("nested"),
        ),
        (
            "EXPLAIN ANALYZE INSERT INTO t VALUES (1)",
            Expect::NotReadOnly("EXPLAIN ANALYZE runs"),
        ),
        (
            "EXPLAIN DELETE FROM t",
            Expect::NotReadOnly("only reads may be explained"),
        ),
        (
            "EXPLAIN ANALYZE WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            Expect::NotReadOnly("nested"),
        ),
        ("PREPARE q AS SELECT 1", Expect::NotReadOnly("PREPARE")),
        ("EXECUTE q", Expect::NotReadOnly("EXECUTE")),
        ("SELEC 1", Expect::Syntax("Line: 1, Column: 1")),
        ("SELECT FROM WHERE", Expect::Syntax("Line: 1")),
        ("SELECT 'unterminated", Expect::Syntax("Line: 1, Column: 8")),
        ("SELECT 1 +", Expect::Syntax("")),
        ("/* a /* b */ c */ SELECT 1", Expect::AmbiguousComment),
    ];
    let mut failures = Vec::new();
    for (sql, expect) in cases {
        let outcome = check_read_only(sql);
        let ok = match (&outcome, expect) {
            (Err(ReadOnlyError::Empty), Expect::Empty) => true,
            (Err(error @ ReadOnlyError::Syntax { .. }), Expect::Syntax(fragment)) => {
                error.to_string().contains(fragment)
            }
            (Err(ReadOnlyError::MultipleStatements { count }), Expect::Multiple(expected)) => {
                count == expected
            }
            (Err(error @ ReadOnlyError::NotReadOnly { .. }), Expect::NotReadOnly(fragment)) => {
                error.to_string().contains(fragment)
            }
            (Err(ReadOnlyError::AmbiguousComment { .. }), Expect::AmbiguousComment) => true,
            _ => false,
        };
        if !ok {
            failures.push(format!("{sql:?}: got {outcome:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "refusals went wrong:\n{}",
        failures.join("\n")
    );
}

#[test]
fn comments_that_trino_would_end_elsewhere_are_refused() {
    // The generic dialect nests block comments and ends line comments only at `\n`;
    // Trino does neither, so each of these is a harmless SELECT to the parser and an
    // INSERT to Trino.
    let hostile = [
        "/* /* */ INSERT INTO t -- */\nSELECT 1",
        "-- hidden\rINSERT INTO t\nSELECT 1",
        "SELECT 1 /* a /* nested */ comment */",
    ];
    for sql in hostile {
        match check_read_only(sql) {
            Err(error @ ReadOnlyError::AmbiguousComment { .. }) => {
                let message = error.to_string();
                assert!(message.contains("ambiguous comment at line 1"), "{message}");
            }
            other => panic!("{sql:?} must be refused as ambiguous, got {other:?}"),
        }
    }
    // A lone `\r\n` line ending is ordinary and fine.
    check_read_only("-- note\r\nSELECT 1").expect("CRLF line endings");
}

#[test]
fn messages_are_lower_case_and_say_why() {
    let error = check_read_only("DELETE FROM secrets WHERE owner = 'alice'").expect_err("a write");
    let message = error.to_string();
    assert_eq!(
        message,
        "DELETE FROM is not allowed: only one SELECT, WITH … SELECT, VALUES, SHOW, DESCRIBE or \
         EXPLAIN of a read is allowed"
    );
    // The message names the statement, never its tables or values.
    assert!(!message.contains("secrets") && !message.contains("alice"));
    assert_eq!(
        check_read_only("SELECT 1; SELECT 2")
            .expect_err("two")
            .to_string(),
        "the sql holds 2 statements; exactly one read-only statement is allowed"
    );
}

#[test]
fn very_long_and_deeply_nested_input_is_handled() {
    // A long but flat statement parses.
    let columns: Vec<String> = (0..20_000).map(|i| format!("c{i}")).collect();
    let long = format!("SELECT {} FROM t", columns.join(", "));
    assert!(long.len() > 100_000);
    check_read_only(&long).expect("a long flat select");

    // Past the byte cap it is refused before parsing.
    let too_long = format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES));
    assert!(matches!(
        check_read_only(&too_long),
        Err(ReadOnlyError::TooLong { .. })
    ));

    // Deep nesting stops at the parser's depth limit instead of overflowing the stack.
    let deep = format!("SELECT {}1{}", "(".repeat(5_000), ")".repeat(5_000));
    let error = check_read_only(&deep).expect_err("too deep");
    assert!(error.to_string().contains("nests more than"), "{error}");

    // A long run of statements is counted, not executed.
    let many = "SELECT 1;".repeat(1_000);
    assert_eq!(
        check_read_only(&many),
        Err(ReadOnlyError::MultipleStatements { count: 1_000 })
    );
}

/// Pass-through table functions hand their text to the connector unchecked: refused
/// wherever they stand, unless the connection allows the function by name.
#[test]
fn table_functions_pass_only_when_the_connection_allows_them_by_name() {
    let pass_through = [
        "SELECT * FROM TABLE(postgresql.system.query(query => 'DELETE FROM accounts RETURNING *'))",
        "SELECT * FROM TABLE(postgresql.system.query(query => 'UPDATE accounts SET balance = 0 RETURNING *'))",
        "SELECT * FROM TABLE(sqlserver.system.procedure(query => 'EXECUTE dbo.purge'))",
        "SELECT * FROM t WHERE id IN (SELECT id FROM TABLE(system.query(query => 'DELETE FROM x')))",
        "WITH x AS (SELECT * FROM TABLE(system.query(query => 'select 1'))) SELECT * FROM x",
        "EXPLAIN SELECT * FROM TABLE(system.query(query => 'select 1'))",
        "SELECT * FROM system.query('DELETE FROM accounts')",
    ];
    for sql in pass_through {
        match check_read_only(sql) {
            Err(ReadOnlyError::NotReadOnly { what, why }) => {
                assert!(what.contains("table function"), "{sql}: {what}");
                assert!(why.contains("allowed_table_functions"), "{sql}: {why}");
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    let rules = ReadOnlyRules {
        allowed_table_functions: vec!["System.Query".into()],
    };
    let allowed = "SELECT * FROM TABLE(system.query(query => 'select 1'))";
    assert_eq!(
        check_read_only_with(allowed, &rules).map(|statement| statement.kind()),
        Ok(StatementKind::Select)
    );
    assert!(
        check_read_only_with(pass_through[0], &rules).is_err(),
        "an allowed name allows that name only, not the same name in another catalog"
    );
}

/// What passes the gate is what Trino receives: the checked statement, without the
/// trailing `;` and what follows it.
#[test]
fn the_checked_text_drops_the_trailing_semicolon_and_what_follows() {
    for (sql, sent) in [
        ("SELECT 1;\n-- c", "SELECT 1"),
        ("  SELECT 1 ;  -- trailing comment\n", "SELECT 1"),
        ("SELECT 1 -- c", "SELECT 1 -- c"),
    ] {
        assert_eq!(check_read_only(sql).expect("read").sql(), sent, "{sql:?}");
    }
}

mod generated {
    //! Property tests: writes hidden at every nesting level never pass; whatever
    //! passes is sent as checked; no input makes the gate panic.

    use docket_export::readonly::check_read_only;
    use proptest::prelude::*;

    /// Statements that write, or hand text to the data source unchecked.
    fn write() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("DELETE FROM accounts".to_owned()),
            Just("UPDATE accounts SET balance = 0".to_owned()),
            Just("INSERT INTO accounts VALUES (1)".to_owned()),
            Just("DROP TABLE accounts".to_owned()),
            Just("CREATE TABLE x AS SELECT 1 AS a".to_owned()),
            Just("TRUNCATE TABLE accounts".to_owned()),
            Just("CALL system.flush()".to_owned()),
            Just("SELECT * FROM TABLE(system.query(query => 'DELETE FROM a'))".to_owned()),
            Just("SELECT * INTO copy FROM accounts".to_owned()),
            Just("SELECT * FROM accounts FOR UPDATE".to_owned()),
        ]
    }

    /// A place to hide a statement in: wrappers that are reads around it, and
    /// separators that add a statement after a read.
    fn hide(inner: BoxedStrategy<String>) -> impl Strategy<Value = String> {
        let wrap = |template: &'static str| {
            inner
                .clone()
                .prop_map(move |inner| template.replace("{}", &inner))
        };
        prop_oneof![
            wrap("WITH x AS ({}) SELECT * FROM x"),
            wrap("SELECT * FROM ({}) AS t"),
            wrap("SELECT * FROM t WHERE id IN ({})"),
            wrap("SELECT (SELECT count(*) FROM ({}) AS s)"),
            wrap("SELECT 1 UNION ALL SELECT * FROM ({}) AS u"),
            wrap("EXPLAIN ANALYZE {}"),
            wrap("EXPLAIN {}"),
            wrap("SELECT 1; {}"),
            wrap("SELECT 1 -- note\n; {}"),
            wrap("/* a; comment */ {}"),
            wrap("{} -- SELECT 1"),
            wrap("  {};  "),
        ]
    }

    fn hidden_write() -> impl Strategy<Value = String> {
        write().prop_recursive(4, 64, 1, |inner| hide(inner.boxed()))
    }

    /// Reads, nested the same ways.
    fn read() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("SELECT 1".to_owned()),
            Just("SELECT a, b FROM t WHERE a = 'x;y' -- c\n".to_owned()),
            Just("VALUES (1), (2)".to_owned()),
        ];
        leaf.prop_recursive(4, 32, 1, |inner| {
            let wrap = move |template: &'static str| {
                inner
                    .clone()
                    .prop_map(move |inner| template.replace("{}", &inner))
            };
            prop_oneof![
                wrap("SELECT * FROM ({}) AS t"),
                wrap("WITH x AS ({}) SELECT * FROM x"),
                wrap("SELECT 1 UNION ALL SELECT * FROM ({}) AS u"),
                wrap("/* comment */ {}"),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn a_hidden_write_never_passes(sql in hidden_write()) {
            prop_assert!(check_read_only(&sql).is_err(), "{sql:?} passed");
        }

        /// The text sent is the input without surrounding blanks and one trailing `;`.
        #[test]
        fn a_read_passes_and_is_sent_as_checked(sql in read(), tail in prop_oneof![Just(""), Just(";"), Just(" ;  ")]) {
            let input = format!("  {sql}{tail}");
            let statement = check_read_only(&input);
            prop_assert!(statement.is_ok(), "{input:?}: {statement:?}");
            let sent = statement.map(|statement| statement.sql().to_owned()).unwrap_or_default();
            prop_assert_eq!(sent.as_str(), sql.trim());
        }

        #[test]
        fn no_input_makes_the_gate_panic(sql in "\\PC{0,200}") {
            let _ = check_read_only(&sql);
        }
    }
}
