//! `modctl lifecycle status` and `modctl lifecycle run [--as-of DATE]` (contract 15).

use anyhow::{anyhow, Context};
use clap::Subcommand;
use moderation_shared::{clock, db::Pool, lifecycle};
use serde_json::Value;
use time::OffsetDateTime;

use crate::instant::parse_rfc3339;

/// How far ahead `--as-of` may be.
const AS_OF_YEARS_AHEAD: i32 = 5;

/// The `lifecycle` subcommands.
#[derive(Debug, Subcommand)]
pub enum LifecycleCommand {
    /// Prints the partitions and what the next run removes.
    Status,
    /// Runs the lifecycle now: makes partitions ahead, drops the expired ones, erases old
    /// content, purges old usage counts; prints what it did.
    Run {
        /// Runs as if the time were this (RFC 3339, at most 5 years ahead): removes what would
        /// be expired then. For planning and tests.
        #[arg(long, value_parser = parse_rfc3339)]
        as_of: Option<OffsetDateTime>,
    },
}

/// Runs a `lifecycle` command with the retention of `APP_RETENTION_DAYS` and
/// `APP_CONTENT_RETENTION_DAYS`.
pub async fn run(pool: &Pool, command: LifecycleCommand) -> anyhow::Result<Value> {
    let retention = lifecycle::Retention::from_env()?;
    let now = clock::now();
    match command {
        LifecycleCommand::Status => {
            let client = pool.get().await.context("cannot reach Postgres")?;
            let status = lifecycle::status(&client, retention, now).await?;
            Ok(serde_json::to_value(status)?)
        }
        LifecycleCommand::Run { as_of } => {
            let as_of = as_of.unwrap_or(now);
            if as_of > latest_as_of(now) {
                return Err(anyhow!(
                    "--as-of must be at most {AS_OF_YEARS_AHEAD} years ahead (until {})",
                    clock::format_millis(latest_as_of(now))
                ));
            }
            let report = lifecycle::run(pool, retention, as_of).await?;
            Ok(serde_json::to_value(report)?)
        }
    }
}

/// `now` five calendar years on (29 February becomes 28 February).
fn latest_as_of(now: OffsetDateTime) -> OffsetDateTime {
    let year = now.year() + AS_OF_YEARS_AHEAD;
    now.replace_year(year)
        .or_else(|_| now.replace_day(28).and_then(|day| day.replace_year(year)))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn as_of_reaches_five_calendar_years_ahead() {
        assert_eq!(
            latest_as_of(datetime!(2026-11-27 10:00 UTC)),
            datetime!(2031-11-27 10:00 UTC)
        );
        assert_eq!(
            latest_as_of(datetime!(2028-02-29 10:00 UTC)),
            datetime!(2033-02-28 10:00 UTC)
        );
    }
}
