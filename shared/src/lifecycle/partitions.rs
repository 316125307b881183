//! The month partitions of the big tables: made ahead, listed, and dropped whole once expired.

use serde::Serialize;
use time::{Date, Duration, Month, OffsetDateTime, UtcOffset};
use uuid::Uuid;

use crate::{
    db::{partition, DbError, GenericClient},
    domain::id_time,
};

/// The partitioned tables, each with how long it keeps rows: jobs and what belongs to them for
/// `APP_RETENTION_DAYS`, the audit log for two years.
pub const TABLES: [(&str, Keep); 8] = [
    ("jobs", Keep::Retention),
    ("job_scores", Keep::Retention),
    ("review_items", Keep::Retention),
    ("job_decisions", Keep::Retention),
    ("appeals", Keep::Retention),
    ("deliveries", Keep::Retention),
    ("delivery_attempts", Keep::Retention),
    ("audit_events", Keep::Audit),
];

/// How long a partitioned table keeps its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// `APP_RETENTION_DAYS`.
    Retention,
    /// Two years (`AUDIT_RETENTION`).
    Audit,
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Partition {
    /// Its table.
    pub table: String,
    /// Its name (`<table>_yYYYYmMM`).
    pub name: String,
    /// The first instant its ids may hold.
    #[serde(with = "time::serde::rfc3339")]
    pub from: OffsetDateTime,
    /// The first instant past it.
    #[serde(with = "time::serde::rfc3339")]
    pub to: OffsetDateTime,
    /// Rows, as Postgres estimates them (`reltuples`; -1 before the first analyze).
    pub rows: i64,
    /// Its size on disk with its indexes, in bytes.
    pub bytes: i64,
}

/// Makes the partitions of every table for the `months` UTC months from the one holding
/// `from` (those that exist are left as they are); returns the names it made.
pub async fn ensure(
    client: &impl GenericClient,
    from: OffsetDateTime,
    months: u32,
) -> Result<Vec<String>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT make_month_partition(t.name, date_trunc('month', $1::timestamptz, 'UTC') \
                                                 + m * interval '1 month') \
             FROM unnest($2::text[]) AS t(name), generate_series(0, $3 - 1) AS m",
        )
        .await?;
    let tables: Vec<&str> = TABLES.iter().map(|(table, _)| *table).collect();
    let months = i32::try_from(months).unwrap_or(i32::MAX);
    Ok(client
        .query(&stmt, &[&from, &tables, &months])
        .await?
        .iter()
        .filter_map(|row| row.get::<_, Option<String>>(0))
        .collect())
}

/// The names of the partitions [`ensure`] would make from `from` for `months` months: those
/// not among `existing`.
pub fn missing(existing: &[Partition], from: OffsetDateTime, months: u32) -> Vec<String> {
    let mut names = Vec::new();
    for (table, _) in TABLES {
        let mut month = first_of_month(from.to_offset(UtcOffset::UTC).date());
        for _ in 0..months {
            let name = partition::month_name(table, month);
            if !existing.iter().any(|p| p.name == name) {
                names.push(name);
            }
            month = next_month(month);
        }
    }
    names
}

fn first_of_month(day: Date) -> Date {
    day.replace_day(1).unwrap_or(day)
}

fn next_month(first: Date) -> Date {
    let (year, month) = match first.month() {
        Month::December => (first.year() + 1, Month::January),
        month => (first.year(), month.next()),
    };
    Date::from_calendar_date(year, month, 1).unwrap_or(first)
}

/// Every partition of the partitioned tables, by table and start.
pub async fn list(client: &impl GenericClient) -> Result<Vec<Partition>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT parent.relname AS table, child.relname AS name, \
                    (regexp_match(pg_get_expr(child.relpartbound, child.oid), \
                                  'FROM \\(''([0-9a-f-]+)''\\) TO \\(''([0-9a-f-]+)''\\)'))::uuid[] \
                        AS bounds, \
                    child.reltuples::int8 AS rows, \
                    pg_total_relation_size(child.oid) AS bytes \
             FROM pg_inherits i \
             JOIN pg_class parent ON parent.oid = i.inhparent \
             JOIN pg_class child ON child.oid = i.inhrelid \
             WHERE parent.relname = ANY($1) \
             ORDER BY parent.relname, child.relname",
        )
        .await?;
    let tables: Vec<&str> = TABLES.iter().map(|(table, _)| *table).collect();
    let rows = client.query(&stmt, &[&tables]).await?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            let bounds: Vec<Uuid> = row.get::<_, Option<Vec<Uuid>>>("bounds")?;
            Some(Partition {
                table: row.get("table"),
                name: row.get("name"),
                from: id_time(*bounds.first()?),
                to: id_time(*bounds.get(1)?),
                rows: row.get("rows"),
                bytes: row.get("bytes"),
            })
        })
        .collect())
}

/// The partitions wholly expired at `as_of`: every id they may hold is older than what their
/// table keeps (`retention` days, or two years for the audit log).
pub fn expired(
    partitions: &[Partition],
    as_of: OffsetDateTime,
    retention: Duration,
) -> Vec<&Partition> {
    partitions
        .iter()
        .filter(|p| {
            let keep = TABLES
                .iter()
                .find(|(table, _)| *table == p.table)
                .map_or(Keep::Retention, |(_, keep)| *keep);
            let kept_since = match keep {
                Keep::Retention => as_of - retention,
                Keep::Audit => as_of - super::AUDIT_RETENTION,
            };
            p.to <= kept_since
        })
        .collect()
}

/// Detaches `partition` from its table without stopping reads or writes
/// (`DETACH PARTITION ... CONCURRENTLY`: it takes no lock that conflicts with them) and drops
/// it, with the rows of `open_jobs` of a dropped partition of `jobs` (jobs that never ended).
/// Run it on a connection outside a transaction.
pub async fn drop(client: &tokio_postgres::Client, partition: &Partition) -> Result<(), DbError> {
    let detach = format!(
        "ALTER TABLE \"{}\" DETACH PARTITION \"{}\" CONCURRENTLY",
        partition.table, partition.name
    );
    if let Err(err) = client.batch_execute(&detach).await {
        // A detach cut short earlier left the partition pending: finish it.
        let pending = err
            .as_db_error()
            .is_some_and(|e| e.message().contains("pending detach"));
        if !pending {
            return Err(err.into());
        }
        client
            .batch_execute(&format!(
                "ALTER TABLE \"{}\" DETACH PARTITION \"{}\" FINALIZE",
                partition.table, partition.name
            ))
            .await?;
    }
    client
        .batch_execute(&format!("DROP TABLE \"{}\"", partition.name))
        .await?;
    if partition.table == "jobs" {
        client
            .execute(
                "DELETE FROM open_jobs WHERE job_id >= $1 AND job_id < $2",
                &[
                    &crate::domain::id_floor(partition.from),
                    &crate::domain::id_floor(partition.to),
                ],
            )
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn partition(table: &str, from: OffsetDateTime, to: OffsetDateTime) -> Partition {
        Partition {
            table: table.to_owned(),
            name: partition::month_name(table, from.date()),
            from,
            to,
            rows: 0,
            bytes: 0,
        }
    }

    #[test]
    fn the_missing_months_run_across_the_year_in_utc() {
        let existing = [partition(
            "jobs",
            datetime!(2026-12-01 0:00 UTC),
            datetime!(2027-01-01 0:00 UTC),
        )];
        // 23:30 on 30 November at UTC-1 is already December in UTC.
        let missing = missing(&existing, datetime!(2026-11-30 23:30 -1), 2);
        assert!(missing.contains(&"jobs_y2027m01".to_owned()));
        assert!(!missing.iter().any(|name| name.starts_with("jobs_y2026")));
        assert!(missing.contains(&"audit_events_y2026m12".to_owned()));
        assert_eq!(missing.len(), 2 * TABLES.len() - 1);
    }

    #[test]
    fn a_partition_expires_once_its_last_instant_is_past_retention() {
        let parts = [
            partition(
                "jobs",
                datetime!(2025-10-01 0:00 UTC),
                datetime!(2025-11-01 0:00 UTC),
            ),
            partition(
                "audit_events",
                datetime!(2025-10-01 0:00 UTC),
                datetime!(2025-11-01 0:00 UTC),
            ),
        ];
        let retention = Duration::days(400);
        // 1 November 2025 plus 400 days is 6 December 2026.
        let edge = datetime!(2026-12-06 0:00 UTC);
        assert!(expired(&parts, edge - Duration::milliseconds(1), retention).is_empty());
        let gone: Vec<&str> = expired(&parts, edge, retention)
            .iter()
            .map(|p| p.table.as_str())
            .collect();
        assert_eq!(gone, ["jobs"], "the audit log keeps two years");
    }
}
