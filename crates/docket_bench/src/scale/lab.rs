//! One part's database: a fresh PostgreSQL schema (dropped when the lab is), the
//! store on it with the server's default pool, the bare-SQL probe on a pool set up
//! the same way, the CPU meter, and a plain client for filling tables.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use docket_storage::probe::PgProbe;
use docket_storage::test_db::{PostgresServer, TestDatabase};
use docket_storage::{ConnectOptions, Store};

use crate::system::{self, CpuMeter};

pub(crate) struct Lab {
    /// The schema's URL, tagged with the run's `application_name`.
    pub(crate) url: String,
    pub(crate) options: ConnectOptions,
    pub(crate) store: Store,
    pub(crate) probe: Arc<PgProbe>,
    pub(crate) meter: CpuMeter,
    /// For filling tables and reading them past every store.
    pub(crate) sql: tokio_postgres::Client,
    _schema: TestDatabase,
}

impl Lab {
    /// A fresh schema, migrated, with pools of `pool_size`.
    pub(crate) async fn open(server: &PostgresServer, pool_size: usize) -> anyhow::Result<Self> {
        let schema = TestDatabase::postgres(server)
            .await
            .context("PostgreSQL is not reachable; start it or set DOCKET_TEST_DATABASE_URL")?;
        let url = system::with_application_name(schema.url());
        let options = ConnectOptions {
            max_connections: pool_size,
            migrate: true,
        };
        let store = docket_storage::connect(&url, options.clone())
            .await
            .context("cannot open the store")?;
        if !matches!(store, Store::Postgres(_)) {
            bail!("the scale suite needs PostgreSQL");
        }
        let probe = Arc::new(
            PgProbe::connect(&url, &options)
                .await
                .context("cannot open the probe's pool")?,
        );
        let (sql, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .context("cannot open the filling connection")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Self {
            url,
            options,
            store,
            meter: CpuMeter::new(Arc::clone(&probe)),
            probe,
            sql,
            _schema: schema,
        })
    }

    /// Another store on the same schema with a pool of its own: a second replica's.
    pub(crate) async fn another_store(&self) -> anyhow::Result<Store> {
        docket_storage::connect(&self.url, self.options.clone())
            .await
            .context("cannot open another replica's store")
    }
}

/// `tasks/get` of `ids` from `clients` keep-alive clients of `url` for `duration`,
/// each client cycling through the ids from its own starting point; every answer
/// must be a complete result.
pub(crate) async fn http_gets(
    meter: &CpuMeter,
    urls: &[String],
    ids: &[String],
    clients: usize,
    duration: std::time::Duration,
) -> anyhow::Result<crate::load::Samples> {
    anyhow::ensure!(!ids.is_empty() && !urls.is_empty(), "nothing to read");
    let requests = Arc::new(
        ids.iter()
            .map(|id| crate::load::get_request(id))
            .collect::<anyhow::Result<Vec<_>>>()?,
    );
    let mut workers = Vec::new();
    for client_index in 0..clients {
        let client = crate::load::McpClient::new(&urls[client_index % urls.len()])?;
        let requests = Arc::clone(&requests);
        let offset = client_index * requests.len() / clients;
        workers.push(move |round: u64| {
            let client = client.clone();
            let requests = Arc::clone(&requests);
            async move {
                let index = (offset + round as usize) % requests.len();
                client
                    .expect(&requests[index], crate::load::ResultType::Complete)
                    .await
            }
        });
    }
    crate::load::concurrent(meter, workers, duration).await
}

/// Task-creating `tools/call`s from `clients` keep-alive clients of `urls` for
/// `duration` (their tasks held until released).
pub(crate) async fn http_creates(
    meter: &CpuMeter,
    urls: &[String],
    clients: usize,
    duration: std::time::Duration,
) -> anyhow::Result<crate::load::Samples> {
    let create = Arc::new(crate::load::create_request()?);
    let mut workers = Vec::new();
    for client_index in 0..clients {
        let client = crate::load::McpClient::new(&urls[client_index % urls.len()])?;
        let create = Arc::clone(&create);
        workers.push(move |_round: u64| {
            let client = client.clone();
            let create = Arc::clone(&create);
            async move { client.expect(&create, crate::load::ResultType::Task).await }
        });
    }
    crate::load::concurrent(meter, workers, duration).await
}

/// Bare primary-key SELECTs of `ids` from `clients` concurrent tasks on the probe's pool.
pub(crate) async fn bare_selects(
    meter: &CpuMeter,
    probe: &Arc<PgProbe>,
    ids: &[String],
    clients: usize,
    duration: std::time::Duration,
) -> anyhow::Result<crate::load::Samples> {
    let ids: Arc<Vec<docket_task::TaskId>> = Arc::new(
        ids.iter()
            .map(|id| docket_task::TaskId::from_stored(id.clone()))
            .collect(),
    );
    anyhow::ensure!(!ids.is_empty(), "nothing to read");
    let workers = (0..clients).map(|client_index| {
        let probe = Arc::clone(probe);
        let ids = Arc::clone(&ids);
        let offset = client_index * ids.len() / clients;
        move |round: u64| {
            let probe = Arc::clone(&probe);
            let ids = Arc::clone(&ids);
            async move {
                let id = &ids[(offset + round as usize) % ids.len()];
                anyhow::ensure!(probe.select_by_id(id).await?, "task {id} not found");
                Ok(())
            }
        }
    });
    crate::load::concurrent(meter, workers, duration).await
}

/// Bare INSERTs from `clients` concurrent tasks on the probe's pool.
pub(crate) async fn bare_inserts(
    meter: &CpuMeter,
    probe: &Arc<PgProbe>,
    clients: usize,
    duration: std::time::Duration,
) -> anyhow::Result<crate::load::Samples> {
    let workers = (0..clients).map(|_| {
        let probe = Arc::clone(probe);
        move |_round: u64| {
            let probe = Arc::clone(&probe);
            async move {
                probe.insert_row().await?;
                Ok(())
            }
        }
    });
    crate::load::concurrent(meter, workers, duration).await
}
