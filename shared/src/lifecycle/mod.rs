//! The data lifecycle (contract 15): how long things are kept, and the runs that make time
//! partitions ahead, drop expired ones and erase old content.

mod partitions;
mod run;
mod settings;

pub use partitions::{ensure as ensure_partitions, list as partitions, Keep, Partition, TABLES};
pub use run::{run, status, Lifecycle, RunReport, Status, ERASE_BATCH, MONTHS_AHEAD};

pub use settings::{
    Retention, AUDIT_RETENTION, DEFAULT_CONTENT_RETENTION_DAYS, DEFAULT_RETENTION_DAYS,
    MIN_RETENTION_DAYS, USAGE_DAYS_RETENTION, USAGE_MINUTES_RETENTION,
};
