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
