//! The Trino client against the Trino double (`docket_trino_double`), which speaks
//! the real protocol over real SQL: paging, columns and type signatures, session
//! headers and credentials, retries, errors with their names and positions, and
//! every way a query can be cancelled.

use std::sync::Arc;
use std::time::Duration;

use docket_export::trino::{
    Page, QueryIds, QueryStream, Session, TrinoAuth, TrinoClient, TrinoConfig, TrinoError,
    explain_estimated_rows,
};
use docket_trino_double::TrinoDouble;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn double() -> TrinoDouble {
    TrinoDouble::start().await.expect("the double starts")
}

fn config(double: &TrinoDouble) -> TrinoConfig {
    let mut config = TrinoConfig::new(double.url(), "alice");
    config.catalog = Some("memory".to_owned());
    config.schema = Some("default".to_owned());
    config.source = "docket-tests".to_owned();
    config.retry_backoff = Duration::from_millis(5);
    config
}

fn client(double: &TrinoDouble) -> TrinoClient {
    TrinoClient::new(config(double)).expect("a valid configuration")
}

/// Reads pages until one has rows.
async fn first_rows(stream: &mut QueryStream) -> Page {
    loop {
        let page = stream
            .next_page()
            .await
            .expect("a page")
            .expect("the query has rows");
        if !page.rows.is_empty() {
            return page;
        }
    }
}

/// Waits until the double has seen a DELETE for `query_id`; a dropped stream sends
/// it from a spawned task, so it arrives a little later.
async fn until_cancelled(double: &TrinoDouble, query_id: &str) {
    for _ in 0..500 {
        if double.cancelled_queries().iter().any(|id| id == query_id) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "no DELETE for {query_id}; cancelled: {:?}",
        double.cancelled_queries()
    );
}

#[tokio::test]
async fn pages_arrive_in_order_with_columns_and_type_signatures() {
    let double = double().await;
    double.set_page_rows(7);
    let mut stream = client(&double)
        .query("SELECT orderkey, orderstatus, totalprice, orderdate, comment FROM orders ORDER BY orderkey")
        .await
        .expect("submitted");

    // The answer to the submission: queued, nothing known yet.
    let queued = stream.next_page().await.expect("a page").expect("not done");
    assert_eq!(queued.stats.state, "QUEUED");
    assert!(queued.columns.is_none() && queued.rows.is_empty());

    let mut rows = Vec::new();
    let mut pages_with_rows = 0;
    let mut columns = None;
    while let Some(page) = stream.next_page().await.expect("a page") {
        assert!(page.rows.len() <= 7, "a page of {} rows", page.rows.len());
        if !page.rows.is_empty() {
            pages_with_rows += 1;
            columns = page.columns.clone();
        }
        rows.extend(page.rows);
    }
    assert_eq!(pages_with_rows, 8, "50 rows in pages of 7");
    let keys: Vec<Value> = rows.iter().map(|row| row[0].clone()).collect();
    assert_eq!(keys, (1..=50).map(Value::from).collect::<Vec<_>>());
    assert_eq!(
        rows[0],
        vec![
            json!(1),
            json!("F"),
            json!("37.75"),
            json!("2024-01-08"),
            json!("order 1")
        ]
    );

    let columns = columns.expect("columns came with the rows");
    let described: Vec<(&str, &str, &str)> = columns
        .iter()
        .map(|column| {
            (
                column.name.as_str(),
                column.type_name.as_str(),
                column.raw_type(),
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            ("orderkey", "bigint", "bigint"),
            ("orderstatus", "varchar(1)", "varchar"),
            ("totalprice", "decimal(12,2)", "decimal"),
            ("orderdate", "date", "date"),
            ("comment", "varchar", "varchar"),
        ]
    );
    let decimal = columns[2].type_signature.as_ref().expect("a signature");
    let arguments: Vec<&Value> = decimal
        .arguments
        .iter()
        .map(|argument| &argument.value)
        .collect();
    assert_eq!(arguments, [&json!(12), &json!(2)]);
    assert_eq!(decimal.arguments[0].kind, "LONG");

    let stats = stream.progress();
    assert_eq!(stats.state, "FINISHED");
    assert_eq!(stats.processed_rows, 50);
    assert_eq!(stats.progress_percentage, Some(100.0));
    assert!(stream.is_finished());
    assert!(
        double.cancelled_queries().is_empty(),
        "a finished query is not cancelled"
    );
}

#[tokio::test]
async fn session_headers_and_basic_credentials_go_with_every_request() {
    let double = double().await;
    // "alice:secret" in base64.
    double.require_authorization(Some("Basic YWxpY2U6c2VjcmV0".to_owned()));
    let mut config = config(&double);
    config.auth = TrinoAuth::Basic {
        username: "alice".to_owned(),
        password: "secret".to_owned(),
    };
    let client = TrinoClient::new(config).expect("a valid configuration");
    let collected = client
        .query("SELECT name FROM customers ORDER BY custkey;\n")
        .await
        .expect("submitted")
        .collect(100)
        .await
        .expect("collected");
    assert_eq!(collected.rows.len(), 6);
    assert_eq!(collected.rows[0], vec![json!("Ada Lovelace")]);

    let submitted = double.submitted();
    assert_eq!(submitted.len(), 1);
    let post = &submitted[0];
    assert_eq!(
        post.body, "SELECT name FROM customers ORDER BY custkey",
        "trailing ; dropped"
    );
    assert_eq!(post.header("x-trino-user"), Some("alice"));
    assert_eq!(post.header("x-trino-catalog"), Some("memory"));
    assert_eq!(post.header("x-trino-schema"), Some("default"));
    assert_eq!(post.header("x-trino-source"), Some("docket-tests"));
    assert_eq!(
        post.header("x-trino-query-data-encoding"),
        None,
        "no spooling asked for"
    );
    let requests = double.requests();
    assert!(requests.len() >= 3, "{requests:#?}");
    for request in &requests {
        assert_eq!(
            request.header("authorization"),
            Some("Basic YWxpY2U6c2VjcmV0"),
            "{} {}",
            request.method,
            request.path
        );
    }
}

#[tokio::test]
async fn a_session_sets_the_user_and_labels_and_writes_down_query_ids() {
    let double = double().await;
    let client = TrinoClient::new(config(&double)).expect("a valid configuration");
    let ids = Arc::new(QueryIds::default());
    let mut session = Session::default();
    session.user = Some("bob".to_owned());
    session.client_tags = vec!["analyst".to_owned(), "trino_query".to_owned()];
    session.client_info = Some(r#"{"call":"c1"}"#.to_owned());
    session.trace_token = Some("trace-1".to_owned());
    session.query_ids = Some(Arc::clone(&ids));
    let as_bob = client.with_session(session);
    assert_eq!(as_bob.session_user(), "bob");
    assert_eq!(client.session_user(), "alice", "the original is unchanged");

    let first = as_bob.query("SELECT 1").await.expect("submitted");
    let first_id = first.query_id().to_owned();
    first.collect(10).await.expect("collected");
    let second = as_bob.query("SELECT 2").await.expect("submitted");
    let second_id = second.query_id().to_owned();
    second.collect(10).await.expect("collected");
    assert_eq!(ids.snapshot(), (vec![first_id, second_id], 0));

    let requests = double.requests();
    assert!(requests.len() >= 4, "{requests:#?}");
    for request in &requests {
        assert_eq!(
            request.header("x-trino-user"),
            Some("bob"),
            "{}",
            request.path
        );
    }
    for post in double.submitted() {
        assert_eq!(
            post.header("x-trino-client-tags"),
            Some("analyst,trino_query")
        );
        assert_eq!(post.header("x-trino-client-info"), Some(r#"{"call":"c1"}"#));
        assert_eq!(post.header("x-trino-trace-token"), Some("trace-1"));
    }

    double.clear_requests();
    client
        .query("SELECT 3")
        .await
        .expect("submitted")
        .collect(10)
        .await
        .expect("collected");
    let post = &double.submitted()[0];
    assert_eq!(post.header("x-trino-user"), Some("alice"));
    assert_eq!(
        post.header("x-trino-client-tags"),
        None,
        "no session, no labels"
    );
}

#[tokio::test]
async fn bearer_tokens_are_sent_and_wrong_credentials_fail_clearly() {
    let double = double().await;
    double.require_authorization(Some("Bearer right-token".to_owned()));
    let with_token = |token: &str| {
        let mut config = config(&double);
        config.auth = TrinoAuth::Bearer {
            token: token.to_owned(),
        };
        TrinoClient::new(config).expect("a valid configuration")
    };
    let collected = with_token("right-token")
        .query("SELECT 1")
        .await
        .expect("submitted")
        .collect(10)
        .await
        .expect("collected");
    assert_eq!(collected.rows, vec![vec![json!(1)]]);

    let error = with_token("wrong-token")
        .query("SELECT 1")
        .await
        .expect_err("unauthorized");
    assert!(
        matches!(error, TrinoError::Http { status: 401, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("http 401"), "{error}");
}

#[tokio::test]
async fn transient_answers_are_retried() {
    let double = double().await;
    let mut stream = client(&double).query("SELECT 42").await.expect("submitted");
    // The submission's own answer costs no request; the page GETs meet the faults.
    stream.next_page().await.expect("queued page");
    double.fail_next_requests(503, 2);
    double.send_empty_body_next(1);
    double.fail_next_requests(502, 1);
    let mut rows = Vec::new();
    while let Some(page) = stream
        .next_page()
        .await
        .expect("retried through the faults")
    {
        rows.extend(page.rows);
    }
    assert_eq!(rows, vec![vec![json!(42)]]);
    let gets = double
        .requests()
        .iter()
        .filter(|request| request.method == "GET")
        .count();
    assert!(
        gets >= 6,
        "four faults and at least two real pages, got {gets} GETs"
    );
}

#[tokio::test]
async fn retries_are_bounded() {
    let double = double().await;
    double.fail_next_requests(503, 10);
    let mut config = config(&double);
    config.max_retries = 2;
    let client = TrinoClient::new(config).expect("a valid configuration");
    let error = client
        .query("SELECT 1")
        .await
        .expect_err("still unavailable");
    assert!(
        matches!(error, TrinoError::Http { status: 503, .. }),
        "{error}"
    );
    assert_eq!(double.submitted().len(), 3, "one try and two retries");
}

async fn query_error(double: &TrinoDouble, sql: &str) -> TrinoError {
    client(double)
        .query(sql)
        .await
        .expect("submitted")
        .collect(1000)
        .await
        .expect_err("the query fails")
}

#[tokio::test]
async fn trino_errors_carry_their_name_type_and_position() {
    let double = double().await;
    let error = query_error(&double, "SELECT *\nFORM orders").await;
    let TrinoError::Query {
        ref name,
        ref kind,
        line,
        column,
        ref message,
        ..
    } = error
    else {
        panic!("expected a query error, got {error:?}");
    };
    assert_eq!(
        (name.as_str(), kind.as_str()),
        ("SYNTAX_ERROR", "USER_ERROR")
    );
    assert_eq!((line, column), (Some(2), Some(1)));
    assert!(message.contains("FORM"), "{message}");
    let shown = error.to_string();
    assert!(shown.starts_with("trino query "), "{shown}");
    assert!(
        shown.contains("failed with SYNTAX_ERROR (USER_ERROR): line 2:1:"),
        "{shown}"
    );

    let error = query_error(&double, "SELECT * FROM memory.default.missing").await;
    assert!(
        matches!(&error, TrinoError::Query { name, line: Some(1), column: Some(15), .. } if name == "TABLE_NOT_FOUND"),
        "{error:?}"
    );
    let error = query_error(&double, "SELECT nope FROM orders").await;
    assert!(
        matches!(&error, TrinoError::Query { name, .. } if name == "COLUMN_NOT_FOUND"),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_error_after_partial_data_follows_the_rows() {
    let double = double().await;
    double.set_page_rows(10);
    let mut stream = client(&double)
        .query("SELECT id, CASE WHEN id = 25 THEN fail('row 25 is bad') ELSE id END FROM synthetic.big.rows_1k")
        .await
        .expect("submitted");
    let mut received = 0;
    let error = loop {
        match stream.next_page().await {
            Ok(Some(page)) => received += page.rows.len(),
            Ok(None) => panic!("the query finished after {received} rows"),
            Err(error) => break error,
        }
    };
    assert_eq!(received, 24, "the rows before the failing one");
    assert!(
        matches!(&error, TrinoError::Query { name, message, .. } if name == "GENERIC_USER_ERROR" && message == "row 25 is bad"),
        "{error:?}"
    );
    assert!(stream.is_finished());
    assert!(stream.next_page().await.expect("no more pages").is_none());
}

#[tokio::test]
async fn cancel_deletes_the_query_and_trino_then_reports_it_cancelled() {
    let double = double().await;
    double.set_page_rows(100);
    let mut stream = client(&double)
        .query("SELECT * FROM synthetic.big.rows_1m")
        .await
        .expect("submitted");
    let page = first_rows(&mut stream).await;
    assert_eq!(page.rows.len(), 100);
    let query_id = stream.query_id().to_owned();
    stream.cancel().await.expect("204");

    assert_eq!(double.cancelled_queries(), vec![query_id.clone()]);
    let delete = double
        .requests()
        .into_iter()
        .find(|request| request.method == "DELETE")
        .expect("a DELETE");
    assert!(delete.path.contains(&query_id), "{}", delete.path);
    // What a client that kept polling would now be told.
    let document: Value = reqwest::get(format!("{}{}", double.url(), delete.path))
        .await
        .expect("answered")
        .json()
        .await
        .expect("a QueryResults document");
    assert_eq!(document["error"]["errorName"], "USER_CANCELED");
    assert!(document.get("nextUri").is_none());
}

#[tokio::test]
async fn dropping_an_unfinished_stream_cancels_the_query() {
    let double = double().await;
    let mut stream = client(&double)
        .query("SELECT * FROM synthetic.big.rows_1m")
        .await
        .expect("submitted");
    first_rows(&mut stream).await;
    let query_id = stream.query_id().to_owned();
    drop(stream);
    until_cancelled(&double, &query_id).await;

    // Dropped before its first page, a query is still cancelled.
    let stream = client(&double)
        .query("SELECT * FROM synthetic.big.rows_1m")
        .await
        .expect("submitted");
    let query_id = stream.query_id().to_owned();
    drop(stream);
    until_cancelled(&double, &query_id).await;
}

#[tokio::test]
async fn a_cancellation_token_stops_the_query_as_documented() {
    let double = double().await;
    double.set_page_rows(50);
    let token = CancellationToken::new();
    let mut stream = client(&double)
        .query("SELECT * FROM synthetic.big.rows_1m")
        .await
        .expect("submitted");
    let query_id = stream.query_id().to_owned();
    let mut rows = 0;
    loop {
        tokio::select! {
            biased;
            () = token.cancelled() => {
                stream.cancel().await.expect("204");
                break;
            }
            page = stream.next_page() => match page.expect("a page") {
                Some(page) => {
                    rows += page.rows.len();
                    // Someone asks to stop once the first rows are in.
                    if rows > 0 {
                        token.cancel();
                    }
                }
                None => panic!("the query finished before it was cancelled"),
            },
        }
    }
    assert_eq!(rows, 50);
    assert_eq!(double.cancelled_queries(), vec![query_id]);
}

#[tokio::test]
async fn a_million_rows_stream_page_by_page() {
    let double = double().await;
    let mut stream = client(&double)
        .query("SELECT * FROM synthetic.big.rows_1m")
        .await
        .expect("submitted");
    let mut rows: u64 = 0;
    let mut id_sum: u64 = 0;
    let mut pages = 0;
    let mut largest_page = 0;
    while let Some(page) = stream.next_page().await.expect("a page") {
        if page.rows.is_empty() {
            continue;
        }
        pages += 1;
        largest_page = largest_page.max(page.rows.len());
        for row in &page.rows {
            rows += 1;
            id_sum += row[0].as_u64().expect("a bigint id");
        }
        // Only this page is held; it is dropped before the next is fetched.
    }
    assert_eq!(rows, 1_000_000);
    assert_eq!(id_sum, 1_000_000 * 1_000_001 / 2, "every row exactly once");
    assert!(
        largest_page <= 4096,
        "pages stay small: {largest_page} rows"
    );
    assert!(pages >= 1_000_000 / 4096, "{pages} pages");
    assert_eq!(stream.progress().processed_rows, 1_000_000);
    assert!(double.cancelled_queries().is_empty());
}

#[tokio::test]
async fn collect_stops_at_the_limit_and_cancels_the_rest() {
    let double = double().await;
    double.set_page_rows(20);
    let client = client(&double);
    let stream = client
        .query("SELECT orderkey FROM orders")
        .await
        .expect("submitted");
    let query_id = stream.query_id().to_owned();
    let collected = stream.collect(5).await.expect("collected");
    assert_eq!(collected.rows.len(), 5);
    assert!(collected.truncated);
    assert_eq!(collected.columns[0].name, "orderkey");
    assert_eq!(double.cancelled_queries(), vec![query_id]);

    let collected = client
        .query("SELECT orderkey FROM orders")
        .await
        .expect("submitted")
        .collect(50)
        .await
        .expect("collected");
    assert_eq!(collected.rows.len(), 50);
    assert!(!collected.truncated, "exactly the limit is not truncated");
    assert_eq!(double.cancelled_queries().len(), 1);
}

#[tokio::test]
async fn metadata_statements_and_explain_estimates() {
    let double = double().await;
    let client = client(&double);
    let rows = |sql: &'static str| {
        let client = client.clone();
        async move {
            client
                .query(sql)
                .await
                .expect("submitted")
                .collect(100)
                .await
                .expect("collected")
        }
    };
    let schemas = rows("SHOW SCHEMAS FROM memory").await;
    assert_eq!(schemas.columns[0].name, "Schema");
    assert_eq!(
        schemas.rows,
        vec![vec![json!("default")], vec![json!("information_schema")]]
    );
    let nation = rows("DESCRIBE tpch.tiny.nation").await;
    let described: Vec<&Value> = nation.rows.iter().map(|row| &row[1]).collect();
    assert_eq!(
        described,
        [
            &json!("bigint"),
            &json!("varchar(25)"),
            &json!("bigint"),
            &json!("varchar(152)")
        ]
    );
    let plan = rows("EXPLAIN SELECT * FROM synthetic.big.rows_1m").await;
    let text = plan.rows[0][0].as_str().expect("plan text");
    assert_eq!(explain_estimated_rows(text), Some(1_000_000), "{text}");
    let filtered = rows("EXPLAIN SELECT * FROM orders WHERE custkey = 1").await;
    let text = filtered.rows[0][0].as_str().expect("plan text");
    assert_eq!(explain_estimated_rows(text), Some(8), "{text}");
}

#[tokio::test]
async fn a_slow_answer_past_the_request_timeout_is_a_timeout() {
    let double = double().await;
    double.set_page_delay(Duration::from_secs(5));
    let mut config = config(&double);
    config.request_timeout = Duration::from_millis(200);
    let client = TrinoClient::new(config).expect("a valid configuration");
    let mut stream = client.query("SELECT 1").await.expect("submitted");
    stream.next_page().await.expect("queued page");
    // The queued GET is not delayed; the executing one is.
    let error = loop {
        match stream.next_page().await {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the slow query finished"),
            Err(error) => break error,
        }
    };
    assert!(matches!(error, TrinoError::Timeout { .. }), "{error:?}");
}

#[tokio::test]
async fn an_unreachable_trino_is_a_transport_error() {
    // Bound and released at once, so that nothing listens there.
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let mut config = TrinoConfig::new(format!("http://{address}"), "alice");
    config.max_retries = 0;
    let error = TrinoClient::new(config)
        .expect("a valid configuration")
        .query("SELECT 1")
        .await
        .expect_err("nobody listens");
    assert!(matches!(error, TrinoError::Transport { .. }), "{error:?}");
    assert!(
        error.to_string().starts_with("could not reach trino"),
        "{error}"
    );
}

#[tokio::test]
async fn an_answer_past_the_size_limit_is_refused_not_read() {
    let double = double().await;
    let mut config = config(&double);
    config.max_response_bytes = 4 * 1024;
    let client = TrinoClient::new(config).expect("a valid configuration");
    let outcome = async {
        let mut stream = client.query("SELECT * FROM synthetic.big.rows_1k").await?;
        while stream.next_text_page().await?.is_some() {}
        Ok::<_, TrinoError>(())
    }
    .await;
    match outcome {
        Err(TrinoError::Protocol { message, .. }) => {
            assert!(message.contains("more than 4096 bytes"), "{message}");
        }
        other => panic!("expected the answer to be refused, got {other:?}"),
    }
    // The same rows under the default limit are read whole.
    assert_eq!(client_rows(&self::client(&double)).await, 1000);
}

async fn client_rows(client: &TrinoClient) -> usize {
    let mut stream = client
        .query("SELECT * FROM synthetic.big.rows_1k")
        .await
        .expect("the query starts");
    let mut rows = 0;
    while let Some(page) = stream.next_text_page().await.expect("a page") {
        rows += page.rows.len();
    }
    rows
}
