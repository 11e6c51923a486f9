//! Opening PostgreSQL connections: one at a time for the migrations and the
//! test harness, and the pool the store (and the benchmark's probe) draw from.

use std::time::Duration;

use deadpool::managed::QueueMode;
use diesel::{ConnectionError, ConnectionResult};
use diesel_async::AsyncPgConnection;
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use tokio_postgres::NoTls;

use crate::error::{Cause, StorageError};
use crate::url::Backend;

/// How long a caller waits for a free pooled connection before the store
/// reports itself unavailable.
const POOL_WAIT: Duration = Duration::from_secs(30);

/// How long opening a pooled connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens one connection. diesel-async's own `establish` keeps only the top line
/// of tokio-postgres's error ("error connecting to server"); connecting here
/// keeps its cause ("Connection refused") for the operator, password scrubbed.
pub(crate) async fn establish(url: String) -> ConnectionResult<AsyncPgConnection> {
    let (client, connection) = tokio_postgres::connect(&url, NoTls)
        .await
        .map_err(|error| {
            ConnectionError::BadConnection(Cause::scrubbed(&error, &url).to_string())
        })?;
    AsyncPgConnection::try_from_client_and_connection(client, connection).await
}

/// A pool of at most `max_connections` connections to the database `url`
/// names, with one connection opened and returned to it, so a database that is
/// not there fails start-up, not the first request.
///
/// A checkout takes the connection returned last (deadpool's default takes the
/// one idle longest). Under light load the same few connections, and so the
/// same few PostgreSQL backend processes, serve call after call with their
/// caches warm, instead of each call waking a different one of the pool's
/// backends in turn; under full load every connection is busy either way.
pub(crate) async fn pool(
    url: &str,
    max_connections: usize,
) -> Result<Pool<AsyncPgConnection>, StorageError> {
    let mut config = ManagerConfig::default();
    config.custom_setup = Box::new(|url| Box::pin(establish(url.to_owned())));
    // Each checkout would otherwise cost a `SELECT 1` round trip; a broken
    // connection is still detected (deadpool asks whether it is closed) and
    // one that breaks mid-use fails that one statement.
    config.recycling_method = RecyclingMethod::Fast;
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config);
    let connect_error = |source: Cause| StorageError::Connect {
        backend: Backend::Postgres,
        source,
    };
    let pool = Pool::builder(manager)
        .max_size(max_connections.max(1))
        .queue_mode(QueueMode::Lifo)
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(POOL_WAIT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .map_err(|error| connect_error(Cause::scrubbed(&error, url)))?;
    drop(
        pool.get()
            .await
            .map_err(|error| connect_error(Cause::scrubbed(&error, url)))?,
    );
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use diesel::QueryableByName;
    use diesel::sql_types::Integer;
    use diesel_async::RunQueryDsl;

    use super::*;
    use crate::statement::statement;
    use crate::test_db::{PostgresServer, TestDatabase};

    #[derive(QueryableByName)]
    struct Backend {
        #[diesel(sql_type = Integer)]
        pid: i32,
    }

    async fn backend_pid(conn: &mut AsyncPgConnection) -> i32 {
        statement("SELECT pg_backend_pid() AS pid")
            .get_result::<Backend>(conn)
            .await
            .expect("read the backend's pid")
            .pid
    }

    /// Calls one after another all go to the connection returned last, never
    /// round the pool's idle connections.
    #[tokio::test]
    async fn a_checkout_takes_the_connection_returned_last_on_postgres() {
        let server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let Some(database) = TestDatabase::postgres(&server).await else {
            return;
        };
        let pool = pool(database.url(), 3).await.expect("open the pool");
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(pool.get().await.expect("check a connection out"));
        }
        let mut pids = Vec::new();
        for conn in &mut held {
            pids.push(backend_pid(conn).await);
        }
        // Returned first to last: the third is the one returned last.
        drop(held);
        for _ in 0..4 {
            let mut conn = pool.get().await.expect("check a connection out");
            assert_eq!(backend_pid(&mut conn).await, pids[2], "backends {pids:?}");
        }
        assert_eq!(pool.status().size, 3, "no connection was opened or closed");
    }
}
