//! Postgres: the pool, migrations and one module per table.
//!
//! Table functions take any [`GenericClient`], so they work on a pooled connection or inside a
//! transaction, and they use `prepare_cached`.
//!
//! The batch statements (many rows by key, from arrays: `... FROM unnest($1::uuid[]) r WHERE
//! t.id = r.id`) are the exception: they take a [`BatchClient`], and those that read a table
//! go out as unnamed statements ([`BatchClient::unnamed`]), so Postgres plans each for its own
//! batch and table. A cached generic plan is made once, from statistics that lag far behind a
//! table growing by thousands of rows a second; for these joins it went stale into hashing the
//! batch and scanning the whole table every time. The batch inserts read no table that grows by
//! the second (the deliveries' looks an endpoint up by its unique key), so no plan of theirs
//! can go stale: they are prepared once per connection ([`insert_batch`]), which spares
//! Postgres parsing them on every call.

use std::{str::FromStr, time::Duration};

pub use deadpool_postgres::{GenericClient, Pool};
use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod, Runtime};
use tokio_postgres::{
    error::SqlState,
    types::{ToSql, Type},
    NoTls, Row,
};

use crate::config::{postgres_config, ConfigError, DatabaseSettings, PG_CONNECT_TIMEOUT};

pub mod accounts;
pub mod api_keys;
pub mod appeals;
pub mod audit_events;
pub mod blocklist;
pub mod custom_categories;
pub mod dashboard_users;
pub mod deliveries;
pub mod delivery_log;
pub mod endpoints;
pub mod hash_bank;
pub mod job_decisions;
pub mod job_keys;
pub mod job_leases;
pub mod job_reports;
pub mod job_scores;
pub mod jobs;
pub mod model_sets;
pub mod operator_notices;
pub(crate) mod partition;
pub mod policy_versions;
pub mod registry_entries;
pub mod review_items;
pub mod webhooks;

mod embedded {
    refinery::embed_migrations!("../migrations");
}

/// A database failure.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// No connection could be had from the pool in time.
    #[error("no database connection available")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// A query failed.
    #[error("database query failed")]
    Query(#[from] tokio_postgres::Error),
    /// The database did not answer within the caller's deadline.
    #[error("the database did not answer within {0:?}")]
    Deadline(Duration),
    /// Applying migrations failed.
    #[error("database migration failed")]
    Migration(#[from] refinery::Error),
    /// A text column held a word the code does not know (see [`crate::domain`]).
    #[error("column {column} holds {value:?}, which is not a known value")]
    UnknownValue {
        /// The column.
        column: &'static str,
        /// What it held.
        value: String,
    },
}

impl DbError {
    /// Whether the failure is Postgres being out of reach rather than anything about the
    /// statement: no connection in time, no answer by the deadline, or the connection lost
    /// under the statement (a restart, a failover, a cut network; see [`connection_lost`]).
    /// Another try, soon, may succeed; the api answers it 503.
    pub fn is_unavailable(&self) -> bool {
        match self {
            DbError::Pool(_) | DbError::Deadline(_) => true,
            DbError::Query(err) => connection_lost(err),
            DbError::Migration(_) | DbError::UnknownValue { .. } => false,
        }
    }
}

/// Whether `err` says the connection itself failed: it was closed or broke (a socket error),
/// or the server said so: SQLSTATE class 08 (connection exception), `57P01`/`57P02`/`57P03`
/// (shut down by an administrator or a crash, or not yet accepting connections), or `25006`
/// (a read-only transaction: the host was a primary and is now a standby).
pub fn connection_lost(err: &tokio_postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    if let Some(code) = err.code() {
        return code.code().starts_with("08")
            || [
                SqlState::ADMIN_SHUTDOWN,
                SqlState::CRASH_SHUTDOWN,
                SqlState::CANNOT_CONNECT_NOW,
                SqlState::READ_ONLY_SQL_TRANSACTION,
            ]
            .contains(code);
    }
    // A socket error; tokio-postgres also reports a malformed message with an I/O error of
    // kind `InvalidInput` or `InvalidData`, which is no lost connection.
    std::error::Error::source(err)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .is_some_and(|io| {
            !matches!(
                io.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
            )
        })
}

/// A pooled connection or a transaction of one (`&pooled` or `&transaction`) that runs batch
/// statements (see the module documentation): prepared ones through its statement cache, and
/// unnamed ones through the connection underneath.
pub trait BatchClient: GenericClient {
    /// The connection or transaction underneath, which sends statements unnamed.
    type Unnamed: tokio_postgres::GenericClient + Sync;

    /// See [`BatchClient::Unnamed`].
    fn unnamed(&self) -> &Self::Unnamed;
}

impl BatchClient for deadpool_postgres::Client {
    type Unnamed = tokio_postgres::Client;

    fn unnamed(&self) -> &tokio_postgres::Client {
        self
    }
}

impl<'a> BatchClient for deadpool_postgres::Transaction<'a> {
    type Unnamed = tokio_postgres::Transaction<'a>;

    fn unnamed(&self) -> &tokio_postgres::Transaction<'a> {
        self
    }
}

/// Runs the batch insert `sql` with `params` (each with its type), prepared once per
/// connection, so Postgres parses it once (see the module documentation for why no plan of
/// it can go stale).
async fn insert_batch(
    client: &impl BatchClient,
    sql: &str,
    params: &[(&(dyn ToSql + Sync), Type)],
) -> Result<Vec<Row>, DbError> {
    let types: Vec<Type> = params.iter().map(|(_, ty)| ty.clone()).collect();
    let statement = client.prepare_typed_cached(sql, &types).await?;
    let values: Vec<&(dyn ToSql + Sync)> = params.iter().map(|&(value, _)| value).collect();
    Ok(client.query(&statement, &values).await?)
}

/// Reads the text column `column` of `row` as a domain word.
fn parse_word<T: FromStr>(row: &Row, column: &'static str) -> Result<T, DbError> {
    word(column, row.try_get(column)?)
}

/// Reads the nullable text column `column` of `row` as a domain word.
fn parse_optional_word<T: FromStr>(row: &Row, column: &'static str) -> Result<Option<T>, DbError> {
    row.try_get::<_, Option<&str>>(column)?
        .map(|raw| word(column, raw))
        .transpose()
}

fn word<T: FromStr>(column: &'static str, raw: &str) -> Result<T, DbError> {
    raw.parse().map_err(|_| DbError::UnknownValue {
        column,
        value: raw.to_owned(),
    })
}

/// Builds the connection pool. Connections are opened lazily, so this succeeds while Postgres
/// is down; callers see [`DbError::Pool`] until it is back. A connection that broke (a
/// restart, a failover, a cut network) is dropped when it next leaves the pool, and the next
/// one opened goes to whichever host of a multi-host URL is the primary then.
pub fn pool(settings: &DatabaseSettings) -> Result<Pool, ConfigError> {
    let pg = postgres_config(settings.url.expose(), "DATABASE_URL")?;
    let manager = Manager::from_config(
        pg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(settings.pool_size.max(1))
        .wait_timeout(Some(settings.acquire_timeout))
        .create_timeout(Some(PG_CONNECT_TIMEOUT))
        .recycle_timeout(Some(PG_CONNECT_TIMEOUT))
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| ConfigError::new("DATABASE_URL", e.to_string()))
}

/// Applies every pending migration in `migrations/`. Returns the versions applied.
pub async fn migrate(pool: &Pool) -> Result<Vec<i32>, DbError> {
    migrate_until(pool, refinery::Target::Latest).await
}

/// Applies the pending migrations up to and including `version` (an upgrade test starts from
/// the schema as it was). Returns the versions applied.
pub async fn migrate_to(pool: &Pool, version: i32) -> Result<Vec<i32>, DbError> {
    migrate_until(pool, refinery::Target::Version(version)).await
}

async fn migrate_until(pool: &Pool, target: refinery::Target) -> Result<Vec<i32>, DbError> {
    let mut conn = pool.get().await?;
    let client: &mut tokio_postgres::Client = &mut conn;
    let report = embedded::migrations::runner()
        .set_abort_divergent(true)
        .set_target(target)
        .run_async(client)
        .await?;
    Ok(report
        .applied_migrations()
        .iter()
        .map(|m| m.version())
        .collect())
}
