//! Fills the tables a curve is measured over, fast: each row a copy of a template
//! row that Docket itself wrote (so every column holds what the code would put there),
//! with a fresh random id and the times the curve needs, in statements of
//! [`CHUNK`] rows so no one transaction grows with the size.

use anyhow::Context as _;
use docket_catalog::ScriptStore;
use docket_catalog::scripts::NewScript;
use docket_run_bridge::RunBridge;
use serde_json::json;

/// Rows one filling statement writes at most.
const CHUNK: u64 = 50_000;

/// The owner of every filled task and run: the anonymous caller the benchmark
/// servers serve, so the filled rows are theirs to read.
pub(crate) const OWNER: &str = "anonymous";

/// The rows of `table`.
pub(crate) async fn rows(sql: &tokio_postgres::Client, table: &str) -> anyhow::Result<u64> {
    let row = sql
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .with_context(|| format!("cannot count {table}"))?;
    Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

/// Copies `template` (an ended task's id) `count` times into `call_tasks`, each copy
/// with a fresh `task_` id and, for `expired`, an expiry a day past.
pub(crate) async fn tasks(
    sql: &tokio_postgres::Client,
    template: &str,
    count: u64,
    expired: bool,
) -> anyhow::Result<()> {
    let expiry = if expired {
        "now() - interval '1 day'"
    } else {
        "t.expires_at"
    };
    let statement = format!(
        "INSERT INTO call_tasks \
         SELECT r.* FROM call_tasks t \
         CROSS JOIN generate_series(1, $2::bigint) g \
         CROSS JOIN LATERAL jsonb_populate_record(t, jsonb_build_object(\
             'task_id', 'task_' || md5(random()::text || clock_timestamp()::text || g), \
             'expires_at', {expiry})) r \
         WHERE t.task_id = $1"
    );
    copies(sql, &statement, template, count, "tasks").await
}

/// Copies `template` (an ended run's id) `count` times into `script_runs`, each copy
/// with a fresh `run_` id and, for `expired`, finished 400 days ago (past the default
/// run retention of 365 days).
pub(crate) async fn runs(
    sql: &tokio_postgres::Client,
    template: &str,
    count: u64,
    expired: bool,
) -> anyhow::Result<()> {
    let finished = if expired {
        "now() - interval '400 days'"
    } else {
        "t.finished_at"
    };
    let statement = format!(
        "INSERT INTO script_runs \
         SELECT r.* FROM script_runs t \
         CROSS JOIN generate_series(1, $2::bigint) g \
         CROSS JOIN LATERAL jsonb_populate_record(t, jsonb_build_object(\
             'id', 'run_' || md5(random()::text || clock_timestamp()::text || g), \
             'finished_at', {finished}, 'created_at', {finished}, 'updated_at', {finished})) r \
         WHERE t.id = $1"
    );
    copies(sql, &statement, template, count, "runs").await
}

async fn copies(
    sql: &tokio_postgres::Client,
    statement: &str,
    template: &str,
    count: u64,
    what: &str,
) -> anyhow::Result<()> {
    let mut left = count;
    while left > 0 {
        let chunk = i64::try_from(left.min(CHUNK)).unwrap_or(i64::MAX);
        let written = sql
            .execute(statement, &[&template, &chunk])
            .await
            .with_context(|| format!("cannot fill {what}"))?;
        anyhow::ensure!(written > 0, "the {what} template {template} is gone");
        left = left.saturating_sub(written);
    }
    Ok(())
}

/// `count` audit rows made 100 days ago (past the default audit retention of 90).
pub(crate) async fn old_audit_rows(sql: &tokio_postgres::Client, count: u64) -> anyhow::Result<()> {
    let mut left = count;
    while left > 0 {
        let chunk = i64::try_from(left.min(CHUNK)).unwrap_or(i64::MAX);
        sql.execute(
            "INSERT INTO audit_logs (created_at, tool, subject, persona, arguments, success, \
                                     outcome, duration_ms) \
             SELECT now() - interval '100 days', 'bench_task', 'anonymous', 'admin', '{}'::jsonb, \
                    true, 'completed', 3 \
             FROM generate_series(1, $1::bigint)",
            &[&chunk],
        )
        .await
        .context("cannot fill audit rows")?;
        left = left.saturating_sub(u64::try_from(chunk).unwrap_or(0));
    }
    Ok(())
}

/// `count` asset rows made 30 days ago (past the default asset retention of 7 days),
/// each naming bytes of its own in the object store.
pub(crate) async fn old_assets(sql: &tokio_postgres::Client, count: u64) -> anyhow::Result<()> {
    let mut left = count;
    while left > 0 {
        let chunk = i64::try_from(left.min(CHUNK)).unwrap_or(i64::MAX);
        sql.execute(
            "INSERT INTO assets (id, owner, name, format, content_type, storage_key, size_bytes, \
                                 row_count, tool, created_at) \
             SELECT k, 'anonymous', 'old export', 'csv', 'text/csv', 'old/' || k || '.csv', 0, 0, \
                    'trino_export', now() - interval '30 days' \
             FROM (SELECT 'asset_' || md5(random()::text || clock_timestamp()::text || g) AS k \
                   FROM generate_series(1, $1::bigint) g) keys",
            &[&chunk],
        )
        .await
        .context("cannot fill assets")?;
        left = left.saturating_sub(u64::try_from(chunk).unwrap_or(0));
    }
    Ok(())
}

/// A script of [`OWNER`]'s and one succeeded run of it, written as the run bridge
/// would leave it; the run's id, for [`runs`] to copy.
pub(crate) async fn run_template(
    scripts: &dyn ScriptStore,
    sql: &tokio_postgres::Client,
) -> anyhow::Result<String> {
    let (script, _) = scripts
        .create_script(
            NewScript {
                id: RunBridge::new_run_id().context("an id")?,
                owner: OWNER.into(),
                name: "scale-template".into(),
                description: String::new(),
                params: json!([]),
                source: "x = 1\n".into(),
                author: OWNER.into(),
                author_roles: Vec::new(),
            },
            u32::MAX,
        )
        .await
        .context("cannot save the template script")?;
    let id = RunBridge::new_run_id().context("an id")?;
    // Written ended, never queued: no worker may claim it.
    sql.execute(
        "INSERT INTO script_runs (id, script_id, script_name, script_owner, version, status, \
                                  params, requested_by, result, metrics, started_at, finished_at) \
         VALUES ($1, $2, $3, $4, $5, 'succeeded', '{}'::jsonb, $4, '{\"value\": 1}'::jsonb, \
                 '{\"steps\": 1, \"host_calls\": 0, \"duration_ms\": 1}'::jsonb, now(), now())",
        &[
            &id,
            &script.id,
            &script.name,
            &script.owner,
            &script.version,
        ],
    )
    .await
    .context("cannot write the template run")?;
    Ok(id)
}

/// `count` ids of `table`'s rows picked at random over the whole table (`column` the
/// key), for reads spread over all of it.
pub(crate) async fn sample_ids(
    sql: &tokio_postgres::Client,
    table: &str,
    column: &str,
    prefix: &str,
    count: usize,
) -> anyhow::Result<Vec<String>> {
    let limit = i64::try_from(count).unwrap_or(i64::MAX);
    let rows = sql
        .query(
            &format!(
                "SELECT {column} FROM {table} WHERE {column} LIKE '{prefix}%' \
                 ORDER BY random() LIMIT $1"
            ),
            &[&limit],
        )
        .await
        .with_context(|| format!("cannot sample {table}"))?;
    Ok(rows.iter().map(|row| row.get::<_, String>(0)).collect())
}
