//! How long data is kept (contract 15): `APP_RETENTION_DAYS` and `APP_CONTENT_RETENTION_DAYS`,
//! and the id floors that keep every read inside them.

use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::{
    config::{env_or, ConfigError},
    domain::id_floor,
};

/// The least `APP_RETENTION_DAYS`: a month of jobs, so the usage series (30 days) is whole.
pub const MIN_RETENTION_DAYS: u32 = 31;
/// `APP_RETENTION_DAYS` when unset.
pub const DEFAULT_RETENTION_DAYS: u32 = 400;
/// `APP_CONTENT_RETENTION_DAYS` when unset.
pub const DEFAULT_CONTENT_RETENTION_DAYS: u32 = 30;
/// How long audit events are kept.
pub const AUDIT_RETENTION: Duration = Duration::days(730);
/// How long the per-day usage counts are kept.
pub const USAGE_DAYS_RETENTION: Duration = Duration::days(730);
/// How long the per-minute usage counts are kept (the hour and day periods read them).
pub const USAGE_MINUTES_RETENTION: Duration = Duration::days(2);

/// How long jobs and their content are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// `APP_RETENTION_DAYS` (at least 31, default 400): jobs, their deliveries, attempts,
    /// review items and decisions older than this are removed and never returned.
    pub days: u32,
    /// `APP_CONTENT_RETENTION_DAYS` (1 to `days`, default 30): a job's content older than this
    /// is erased; its decision stays.
    pub content_days: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            days: DEFAULT_RETENTION_DAYS,
            content_days: DEFAULT_CONTENT_RETENTION_DAYS,
        }
    }
}

impl Retention {
    /// Reads `APP_RETENTION_DAYS` and `APP_CONTENT_RETENTION_DAYS`.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::new(
            env_or("APP_RETENTION_DAYS", DEFAULT_RETENTION_DAYS)?,
            env_or("APP_CONTENT_RETENTION_DAYS", DEFAULT_CONTENT_RETENTION_DAYS)?,
        )
    }

    /// `days` and `content_days`, checked: the error names the variable at fault.
    pub fn new(days: u32, content_days: u32) -> Result<Self, ConfigError> {
        if days < MIN_RETENTION_DAYS {
            return Err(ConfigError::new(
                "APP_RETENTION_DAYS",
                format!("must be at least {MIN_RETENTION_DAYS} days, got {days}"),
            ));
        }
        if content_days == 0 || content_days > days {
            return Err(ConfigError::new(
                "APP_CONTENT_RETENTION_DAYS",
                format!("must be from 1 to APP_RETENTION_DAYS ({days}) days, got {content_days}"),
            ));
        }
        Ok(Self { days, content_days })
    }

    /// The earliest instant still kept at `now`.
    pub fn kept_since(&self, now: OffsetDateTime) -> OffsetDateTime {
        now - Duration::days(i64::from(self.days))
    }

    /// The least id still kept at `now`: reads ask for ids at or above it, so a row past
    /// retention is never returned, even while its partition holds younger rows.
    pub fn floor(&self, now: OffsetDateTime) -> Uuid {
        id_floor(self.kept_since(now))
    }

    /// Jobs with ids below this at `now` have their content erased.
    pub fn content_floor(&self, now: OffsetDateTime) -> Uuid {
        id_floor(now - Duration::days(i64::from(self.content_days)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_is_checked_at_its_floors_naming_the_variable() {
        assert!(Retention::new(31, 31).is_ok());
        assert!(Retention::new(31, 1).is_ok());
        assert_eq!(
            Retention::new(30, 30).unwrap_err().name,
            "APP_RETENTION_DAYS"
        );
        assert_eq!(
            Retention::new(400, 401).unwrap_err().name,
            "APP_CONTENT_RETENTION_DAYS"
        );
        assert_eq!(
            Retention::new(400, 0).unwrap_err().name,
            "APP_CONTENT_RETENTION_DAYS"
        );
    }

    #[test]
    fn the_floor_is_the_id_of_the_oldest_kept_instant() {
        let now = time::macros::datetime!(2026-11-27 12:00 UTC);
        let retention = Retention::new(31, 10).unwrap();
        assert_eq!(
            crate::domain::id_time(retention.floor(now)),
            time::macros::datetime!(2026-10-27 12:00 UTC)
        );
        assert!(retention.content_floor(now) > retention.floor(now));
    }
}
