//! Opening one PostgreSQL connection, for the pool, the migrations and the
//! test harness alike.

use diesel::{ConnectionError, ConnectionResult};
use diesel_async::AsyncPgConnection;
use tokio_postgres::NoTls;

use crate::error::Cause;

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
