//! Which table a hot statement names: its rows' month partition when that one is certain to
//! hold them, else the partitioned table.
//!
//! A statement through a partitioned table is planned through it: Postgres considers the
//! partitions and prunes them by the ids. For the worker's claim and finish that was a third
//! of their planning (pg_stat_statements, one e2e run each way: 0.53 and 0.55 ms a call
//! through the table, 0.36 ms each with the partition named; docs/scaling.md). The partition
//! is named only when every id of the statement falls in the current UTC month: it exists whenever
//! the service can store a job at all (it is made months ahead, and a submission needs it),
//! and nothing drops it. Anything else (a batch across two months, a job of an earlier month,
//! an id from a clock ahead of this one) goes through the table.

use std::borrow::Cow;

use time::{Date, OffsetDateTime, UtcOffset};
use uuid::Uuid;

use crate::domain::id_time;

/// `table`'s month partition (`<table>_yYYYYmMM`) holding every one of `ids`, when they all
/// fall in the UTC month of `now`; else `table` itself.
pub(super) fn table_of<'a>(
    table: &'a str,
    ids: impl IntoIterator<Item = Uuid>,
    now: OffsetDateTime,
) -> Cow<'a, str> {
    let now = now.to_offset(UtcOffset::UTC);
    let mut ids = ids.into_iter().peekable();
    let this_month = ids.peek().is_some()
        && ids.all(|id| {
            let at = id_time(id).to_offset(UtcOffset::UTC);
            (at.year(), at.month()) == (now.year(), now.month())
        });
    if !this_month {
        return Cow::Borrowed(table);
    }
    Cow::Owned(month_name(table, now.date()))
}

/// The name of `table`'s partition for the month of `day` (`<table>_yYYYYmMM`), as
/// `make_month_partition` (V017) names it.
pub(crate) fn month_name(table: &str, day: Date) -> String {
    format!("{table}_y{:04}m{:02}", day.year(), u8::from(day.month()))
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    /// A UUIDv7 made at `at`.
    fn id_at(at: OffsetDateTime) -> Uuid {
        let millis = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap();
        uuid::Builder::from_unix_timestamp_millis(millis, &[0; 10]).into_uuid()
    }

    #[test]
    fn ids_of_this_month_name_its_partition() {
        let now = datetime!(2027-01-10 12:00 UTC);
        let this_month = [
            id_at(datetime!(2027-01-01 0:00 UTC)),
            id_at(now),
            id_at(datetime!(2027-01-31 23:59:59.999 UTC)),
        ];
        assert_eq!(table_of("jobs", this_month, now), "jobs_y2027m01");
    }

    #[test]
    fn months_are_those_of_utc() {
        // 23:30 on 31 December at UTC-1 is already January in UTC, and so is its id.
        let now = datetime!(2026-12-31 23:30 -1);
        assert_eq!(table_of("jobs", [id_at(now)], now), "jobs_y2027m01");
    }

    #[test]
    fn anything_else_goes_through_the_table() {
        let now = datetime!(2027-01-10 12:00 UTC);
        let across = [
            id_at(datetime!(2026-12-31 23:59 UTC)),
            id_at(datetime!(2027-01-01 0:01 UTC)),
        ];
        assert_eq!(table_of("jobs", across, now), "jobs");
        let before = [id_at(datetime!(2026-12-31 23:59:59.999 UTC))];
        assert_eq!(table_of("jobs", before, now), "jobs");
        let ahead = [id_at(datetime!(2027-02-01 0:00 UTC))];
        assert_eq!(table_of("jobs", ahead, now), "jobs");
        assert_eq!(table_of("jobs", [], now), "jobs");
    }
}
