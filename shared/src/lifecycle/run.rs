//! One run of the lifecycle: partitions made ahead, expired ones dropped, old content erased,
//! old usage counts purged; recorded in `lifecycle_runs`. [`run`] does it as of any instant
//! (`modctl lifecycle run --as-of`); [`Lifecycle::run_until_stopped`] does it now and then,
//! in one process at a time.

use std::time::Duration as StdDuration;

use serde::Serialize;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::{partitions, Partition, Retention, USAGE_DAYS_RETENTION, USAGE_MINUTES_RETENTION};
use crate::{
    clock,
    db::{DbError, GenericClient, Pool},
    domain::id_floor,
};

/// Months of partitions kept made ahead of the current one.
pub const MONTHS_AHEAD: u32 = 2;
/// Jobs whose content one statement erases at most: short transactions, no long locks.
pub const ERASE_BATCH: i64 = 1000;
/// The lease's name in `maintenance_leases`.
const LEASE: &str = "lifecycle";

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunReport {
    /// The instant it ran as of.
    #[serde(with = "time::serde::rfc3339")]
    pub as_of: OffsetDateTime,
    /// The partitions it made.
    pub partitions_made: Vec<String>,
    /// The partitions it dropped.
    pub partitions_dropped: Vec<String>,
    /// Jobs whose content it erased.
    pub contents_erased: u64,
    /// Usage count rows it removed.
    pub usage_rows_purged: u64,
}

/// Runs the lifecycle as of `as_of` (now, or a later instant for planning and tests): makes
/// the partitions of the month holding `as_of` and the next [`MONTHS_AHEAD`], erases the
/// content of jobs older than the content retention, drops the partitions wholly past
/// retention and purges expired usage counts. `pool` gives the connections (partitions are
/// detached outside any transaction).
pub async fn run(
    pool: &Pool,
    retention: Retention,
    as_of: OffsetDateTime,
) -> Result<RunReport, DbError> {
    let client = pool.get().await?;
    let id = Uuid::now_v7();
    let begun = client
        .prepare_cached("INSERT INTO lifecycle_runs (id, as_of) VALUES ($1, $2)")
        .await?;
    client.execute(&begun, &[&id, &as_of]).await?;
    let mut report = RunReport {
        as_of,
        partitions_made: Vec::new(),
        partitions_dropped: Vec::new(),
        contents_erased: 0,
        usage_rows_purged: 0,
    };
    report.partitions_made = partitions::ensure(&client, as_of, MONTHS_AHEAD + 1).await?;
    // Expired partitions go first: their rows' content needs no erasing.
    let all = partitions::list(&client).await?;
    let retained = Duration::days(i64::from(retention.days));
    for partition in partitions::expired(&all, as_of, retained) {
        partitions::drop(&client, partition).await?;
        tracing::info!(partition = %partition.name, "Dropped an expired partition");
        report.partitions_dropped.push(partition.name.clone());
    }
    report.contents_erased = erase_content(
        &client,
        retention.floor(as_of),
        retention.content_floor(as_of),
    )
    .await?;
    report.usage_rows_purged = purge_usage(&client, as_of).await?;
    let ended = client
        .prepare_cached(
            "UPDATE lifecycle_runs SET finished_at = now(), partitions_made = $2, \
                    partitions_dropped = $3, contents_erased = $4, usage_rows_purged = $5 \
             WHERE id = $1",
        )
        .await?;
    let erased = i64::try_from(report.contents_erased).unwrap_or(i64::MAX);
    let purged = i64::try_from(report.usage_rows_purged).unwrap_or(i64::MAX);
    client
        .execute(
            &ended,
            &[
                &id,
                &report.partitions_made,
                &report.partitions_dropped,
                &erased,
                &purged,
            ],
        )
        .await?;
    Ok(report)
}

/// Where the lifecycle stands and what its next run (as of `as_of`) would do.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The instant the plan is for.
    #[serde(with = "time::serde::rfc3339")]
    pub as_of: OffsetDateTime,
    /// `APP_RETENTION_DAYS`.
    pub retention_days: u32,
    /// `APP_CONTENT_RETENTION_DAYS`.
    pub content_retention_days: u32,
    /// Every partition, by table and month.
    pub partitions: Vec<Partition>,
    /// The partitions the run would make.
    pub partitions_to_make: Vec<String>,
    /// The partitions the run would drop.
    pub partitions_to_drop: Vec<String>,
    /// Jobs whose content the run would erase.
    pub contents_to_erase: i64,
    /// The last run that ended.
    pub last_run: Option<RunReport>,
}

/// What a run as of `as_of` would do, and the partitions as they are.
pub async fn status(
    client: &impl GenericClient,
    retention: Retention,
    as_of: OffsetDateTime,
) -> Result<Status, DbError> {
    let all = partitions::list(client).await?;
    let retained = Duration::days(i64::from(retention.days));
    let partitions_to_drop = partitions::expired(&all, as_of, retained)
        .into_iter()
        .map(|p| p.name.clone())
        .collect();
    let partitions_to_make = partitions::missing(&all, as_of, MONTHS_AHEAD + 1);
    let pending = client
        .prepare_cached(
            "SELECT count(*) FROM jobs, lifecycle_state \
             WHERE id >= greatest(content_erased_before, $2) AND id < $1 \
               AND content IS NOT NULL",
        )
        .await?;
    let contents_to_erase = client
        .query_one(
            &pending,
            &[&retention.content_floor(as_of), &retention.floor(as_of)],
        )
        .await?
        .get(0);
    let last = client
        .prepare_cached(
            "SELECT as_of, partitions_made, partitions_dropped, contents_erased, \
                    usage_rows_purged \
             FROM lifecycle_runs WHERE finished_at IS NOT NULL \
             ORDER BY finished_at DESC LIMIT 1",
        )
        .await?;
    let last_run = client.query_opt(&last, &[]).await?.map(|row| RunReport {
        as_of: row.get(0),
        partitions_made: row.get(1),
        partitions_dropped: row.get(2),
        contents_erased: u64::try_from(row.get::<_, i64>(3)).unwrap_or(0),
        usage_rows_purged: u64::try_from(row.get::<_, i64>(4)).unwrap_or(0),
    });
    Ok(Status {
        as_of,
        retention_days: retention.days,
        content_retention_days: retention.content_days,
        partitions: all,
        partitions_to_make,
        partitions_to_drop,
        contents_to_erase,
        last_run,
    })
}

/// Erases, a batch at a time, the content of every job with an id below `floor`, from where
/// the last run stopped (`lifecycle_state.content_erased_before`) or from the retention floor
/// `kept`, whichever is later (rows below it are never read again and go with their
/// partitions); returns how many.
async fn erase_content(
    client: &impl GenericClient,
    kept: Uuid,
    floor: Uuid,
) -> Result<u64, DbError> {
    let start = client
        .prepare_cached("SELECT content_erased_before FROM lifecycle_state")
        .await?;
    let from: Uuid = client
        .query_one(&start, &[])
        .await?
        .get::<_, Uuid>(0)
        .max(kept);
    if from >= floor {
        return Ok(0);
    }
    let batch = client
        .prepare_cached(
            "UPDATE jobs SET content = NULL, messages = NULL, content_erased_at = now() \
             WHERE id IN (SELECT id FROM jobs \
                          WHERE id >= $1 AND id < $2 AND content IS NOT NULL \
                          ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)",
        )
        .await?;
    let mut erased = 0;
    loop {
        let n = client
            .execute(&batch, &[&from, &floor, &ERASE_BATCH])
            .await?;
        erased += n;
        if n < u64::try_from(ERASE_BATCH).unwrap_or(u64::MAX) {
            break;
        }
    }
    // Rows some transaction held are left for the next run: the mark moves only once nothing
    // is left below the floor, and never past an hour ago (a run as of a later date erases
    // what it finds, but jobs submitted since keep their place for the runs to come).
    let left = client
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE id >= $1 AND id < $2 AND content IS NOT NULL)",
        )
        .await?;
    if !client
        .query_one(&left, &[&from, &floor])
        .await?
        .get::<_, bool>(0)
    {
        let mark = client
            .prepare_cached("UPDATE lifecycle_state SET content_erased_before = $1")
            .await?;
        let mark_at = floor.min(id_floor(clock::now() - Duration::hours(1)));
        client.execute(&mark, &[&mark_at]).await?;
    }
    Ok(erased)
}

/// Removes the usage counts past their retention (minutes: two days; days: two years).
async fn purge_usage(client: &impl GenericClient, as_of: OffsetDateTime) -> Result<u64, DbError> {
    let minutes = client
        .prepare_cached("DELETE FROM usage_minutes WHERE minute < $1")
        .await?;
    let days = client
        .prepare_cached("DELETE FROM usage_days WHERE day < ($1 AT TIME ZONE 'UTC')::date")
        .await?;
    let removed = client
        .execute(&minutes, &[&(as_of - USAGE_MINUTES_RETENTION)])
        .await?
        + client
            .execute(&days, &[&(as_of - USAGE_DAYS_RETENTION)])
            .await?;
    Ok(removed)
}

/// The lifecycle of a process: runs every `every`, while this process holds the lease (one
/// process of the fleet at a time).
pub struct Lifecycle {
    pool: Pool,
    retention: Retention,
    every: StdDuration,
    holder: Uuid,
}

impl Lifecycle {
    /// A lifecycle on `pool` keeping `retention`, run every `every`.
    pub fn new(pool: Pool, retention: Retention, every: StdDuration) -> Self {
        Self {
            pool,
            retention,
            every,
            holder: Uuid::now_v7(),
        }
    }

    /// Takes or renews the lease for a run and more (twice `every`): `false` when another
    /// process holds it.
    async fn lease(&self) -> Result<bool, DbError> {
        let client = self.pool.get().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO maintenance_leases (name, holder, until) \
                 VALUES ($1, $2, now() + make_interval(secs => $3)) \
                 ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until \
                 WHERE maintenance_leases.until < now() \
                    OR maintenance_leases.holder = EXCLUDED.holder",
            )
            .await?;
        let secs = self.every.as_secs_f64() * 2.0;
        Ok(client
            .execute(&stmt, &[&LEASE, &self.holder, &secs])
            .await?
            == 1)
    }

    /// Runs now if this process holds the lease: `None` when another does.
    pub async fn try_run(&self) -> Result<Option<RunReport>, DbError> {
        if !self.lease().await? {
            return Ok(None);
        }
        run(&self.pool, self.retention, clock::now())
            .await
            .map(Some)
    }

    /// Runs at start and then every `every`, until the task is dropped.
    pub async fn run_until_stopped(self) {
        loop {
            match self.try_run().await {
                Ok(Some(report)) => tracing::info!(
                    made = report.partitions_made.len(),
                    dropped = report.partitions_dropped.len(),
                    erased = report.contents_erased,
                    "Lifecycle run done"
                ),
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "Lifecycle run failed; trying again later"),
            }
            tokio::time::sleep(self.every).await;
        }
    }
}
