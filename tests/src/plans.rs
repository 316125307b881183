//! Reading EXPLAIN output: which tables a plan reads whole, and whether it sorts.
//!
//! The big tables are partitioned by month, so a plan reads each partition apart. An empty
//! partition (a month ahead, or one no test wrote to) is read by a sequential scan of nothing,
//! which costs nothing: only a full read of a table holding rows is a defect.

use deadpool_postgres::Object;

/// Whether `plan` sorts rows itself (a `Sort` or `Incremental Sort` node) rather than reading
/// them in an index's order (a `Merge Append` of index scans keeps their order).
pub fn sorts(plan: &str) -> bool {
    plan.lines().any(|line| line.contains("Sort  ("))
}

/// The tables `plan` reads whole (`Seq Scan on <table>`) that hold rows, as the last ANALYZE
/// counted them.
pub async fn full_reads(client: &Object, plan: &str) -> Vec<String> {
    let scanned: Vec<String> = plan
        .lines()
        .filter_map(|line| line.split("Seq Scan on ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    client
        .query(
            "SELECT relname FROM pg_class WHERE relname = ANY($1) AND reltuples > 0 \
             ORDER BY relname",
            &[&scanned],
        )
        .await
        .expect("read the scanned tables' sizes")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Reads of one partition so far: sequential scans and index scans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    /// Sequential scans.
    pub seq: i64,
    /// Index scans.
    pub idx: i64,
}

/// The reads of every partition of `table` (`<table>_yYYYYmMM`) so far, from the cumulative
/// statistics, after this connection's own pending counts are flushed: call it on the
/// connection that ran the statement under test, before and after, and compare with
/// [`read_between`].
pub async fn partition_reads(
    client: &Object,
    table: &str,
) -> std::collections::BTreeMap<String, Reads> {
    flush_own_statistics(client).await;
    client
        .query(
            "SELECT relname, seq_scan, coalesce(idx_scan, 0) FROM pg_stat_user_tables \
             WHERE relname LIKE $1 || '\\_y%' ORDER BY relname",
            &[&table],
        )
        .await
        .expect("read the tables' statistics")
        .iter()
        .map(|row| {
            (
                row.get(0),
                Reads {
                    seq: row.get(1),
                    idx: row.get(2),
                },
            )
        })
        .collect()
}

/// The partitions read between two [`partition_reads`], with how.
pub fn read_between(
    before: &std::collections::BTreeMap<String, Reads>,
    after: &std::collections::BTreeMap<String, Reads>,
) -> Vec<(String, Reads)> {
    after
        .iter()
        .filter_map(|(name, now)| {
            let was = before.get(name).copied().unwrap_or_default();
            let read = Reads {
                seq: now.seq - was.seq,
                idx: now.idx - was.idx,
            };
            (read != Reads::default()).then(|| (name.clone(), read))
        })
        .collect()
}

/// The index scans so far of each index of `table` (a partition, say), by index name, after
/// this connection's own pending counts are flushed (as for [`partition_reads`]).
pub async fn index_scans(client: &Object, table: &str) -> std::collections::BTreeMap<String, i64> {
    flush_own_statistics(client).await;
    client
        .query(
            "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = $1",
            &[&table],
        )
        .await
        .expect("read the indexes' statistics")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// The rows of `table` (a partition, say) updated so far, and of them those updated HOT (a new
/// version on the row's own page, no index entry written), after this connection's own pending
/// counts are flushed (as for [`partition_reads`]).
pub async fn row_updates(client: &Object, table: &str) -> (i64, i64) {
    flush_own_statistics(client).await;
    let row = client
        .query_one(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = $1",
            &[&table],
        )
        .await
        .expect("read the table's statistics");
    (row.get(0), row.get(1))
}

/// The indexes scanned between two readings of [`index_scans`], by name.
pub fn scanned_between(
    before: &std::collections::BTreeMap<String, i64>,
    after: &std::collections::BTreeMap<String, i64>,
) -> Vec<String> {
    after
        .iter()
        .filter(|(name, scans)| before.get(*name) != Some(*scans))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Has this connection's pending statistics flushed (once the backend is idle, after this
/// statement) and read as they are then, not as a snapshot taken earlier in the transaction.
async fn flush_own_statistics(client: &Object) {
    client
        .batch_execute("SELECT pg_stat_force_next_flush()")
        .await
        .expect("ask for a flush of the statistics");
    client
        .batch_execute("SET stats_fetch_consistency = none")
        .await
        .expect("read the statistics as they are");
}
