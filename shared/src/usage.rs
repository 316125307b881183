//! Usage: an account's submitted jobs over time, per series, in UTC buckets. The api's
//! `GET /api/v1/usage/volume` answers it as JSON; the dashboard draws it.
//!
//! Buckets are aligned to UTC minute, hour or day boundaries. The series ends with the bucket
//! holding the current instant (a partial bucket) and reaches back a fixed number of buckets:
//! 60 minutes for `hour`, 24 hours for `day`, 7 days for `week`, 30 days for `month`. So the
//! window is the period plus the part of the current bucket already elapsed; every bucket
//! appears, oldest first, with zeros where nothing was submitted.

use serde::Serialize;
use time::{Duration, OffsetDateTime, Time, UtcOffset};
use utoipa::ToSchema;

use crate::{
    clock,
    db::{job_reports, DbError, GenericClient},
    domain::AccountId,
};

/// A `period` that is not one of the four.
#[derive(Debug, thiserror::Error)]
#[error("unknown period {0:?} (expected hour, day, week or month)")]
pub struct UnknownPeriod(pub String);

/// A period of the series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// The last hour in minute buckets.
    Hour,
    /// The last 24 hours in hour buckets.
    Day,
    /// The last 7 days in day buckets (the default).
    Week,
    /// The last 30 days in day buckets.
    Month,
}

impl Period {
    /// Reads the `period` parameter; absent means `week`.
    pub fn parse(value: Option<&str>) -> Result<Self, UnknownPeriod> {
        match value {
            None => Ok(Period::Week),
            Some("hour") => Ok(Period::Hour),
            Some("day") => Ok(Period::Day),
            Some("week") => Ok(Period::Week),
            Some("month") => Ok(Period::Month),
            Some(other) => Err(UnknownPeriod(other.to_owned())),
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Hour => "hour",
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }

    /// The bucket unit's name and length.
    pub fn bucket(self) -> (&'static str, Duration) {
        match self {
            Period::Hour => ("minute", Duration::MINUTE),
            Period::Day => ("hour", Duration::HOUR),
            Period::Week | Period::Month => ("day", Duration::DAY),
        }
    }

    /// How many buckets the series has.
    pub fn buckets(self) -> usize {
        match self {
            Period::Hour => 60,
            Period::Day => 24,
            Period::Week => 7,
            Period::Month => 30,
        }
    }

    /// The bucket starts of the series at `now`, oldest first; the last holds `now`.
    pub fn starts(self, now: OffsetDateTime) -> Vec<OffsetDateTime> {
        let now = now.to_offset(UtcOffset::UTC);
        let time = now.time();
        let last = match self {
            Period::Hour => Time::from_hms(time.hour(), time.minute(), 0),
            Period::Day => Time::from_hms(time.hour(), 0, 0),
            Period::Week | Period::Month => Ok(Time::MIDNIGHT),
        }
        .map_or(now, |t| now.replace_time(t));
        let (_, length) = self.bucket();
        (0..self.buckets())
            .rev()
            .map(|back| last - length * i32::try_from(back).unwrap_or(0))
            .collect()
    }
}

/// Jobs submitted in one bucket, by series.
#[derive(Debug, Serialize, ToSchema)]
pub struct Point {
    /// The bucket's start.
    #[serde(with = "clock::serde_millis")]
    #[schema(value_type = String, format = DateTime)]
    pub ts: OffsetDateTime,
    /// Legacy `pre` jobs.
    pub pre: i64,
    /// Legacy `post` jobs.
    pub post: i64,
    /// Text jobs: prompts and chats.
    pub prompt: i64,
    /// Image jobs.
    pub image: i64,
    /// Video jobs.
    pub video: i64,
    /// Audio jobs.
    pub audio: i64,
}

/// The series of `account` for `period` at `now`: one point per bucket, oldest first.
pub async fn series(
    client: &impl GenericClient,
    account: AccountId,
    period: Period,
    now: OffsetDateTime,
) -> Result<Vec<Point>, DbError> {
    let (unit, length) = period.bucket();
    let starts = period.starts(now);
    let (Some(&first), Some(&last)) = (starts.first(), starts.last()) else {
        return Ok(Vec::new());
    };
    let counts = job_reports::volume(client, account, unit, first, last + length).await?;
    let mut data: Vec<Point> = starts
        .iter()
        .map(|&ts| Point {
            ts,
            pre: 0,
            post: 0,
            prompt: 0,
            image: 0,
            video: 0,
            audio: 0,
        })
        .collect();
    for count in counts {
        let Some(point) = starts
            .binary_search(&count.bucket)
            .ok()
            .and_then(|i| data.get_mut(i))
        else {
            continue;
        };
        let series = match count.job_type.as_str() {
            "text" | "chat" => &mut point.prompt,
            "image" => &mut point.image,
            "video" => &mut point.video,
            "audio" => &mut point.audio,
            "pre" => &mut point.pre,
            "post" => &mut point.post,
            // generate and companion_* jobs belong to no series.
            _ => continue,
        };
        *series += count.count;
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn periods_parse_with_week_as_the_default() {
        assert_eq!(Period::parse(None).unwrap(), Period::Week);
        assert_eq!(Period::parse(Some("hour")).unwrap(), Period::Hour);
        assert_eq!(Period::parse(Some("month")).unwrap(), Period::Month);
        assert!(Period::parse(Some("year")).is_err());
        assert!(Period::parse(Some("")).is_err());
    }

    #[test]
    fn each_series_ends_with_the_bucket_holding_now() {
        let now = datetime!(2026-11-22 10:17:42.5 UTC);
        let hour = Period::Hour.starts(now);
        assert_eq!(hour.len(), 60);
        assert_eq!(hour[59], datetime!(2026-11-22 10:17 UTC));
        assert_eq!(hour[0], datetime!(2026-11-22 9:18 UTC));
        let day = Period::Day.starts(now);
        assert_eq!(day.len(), 24);
        assert_eq!(day[23], datetime!(2026-11-22 10:00 UTC));
        assert_eq!(day[0], datetime!(2026-11-21 11:00 UTC));
        let week = Period::Week.starts(now);
        assert_eq!(
            week,
            (0..7)
                .map(|d| datetime!(2026-11-16 0:00 UTC) + Duration::days(d))
                .collect::<Vec<_>>()
        );
        let month = Period::Month.starts(now);
        assert_eq!(month.len(), 30);
        assert_eq!(month[0], datetime!(2026-10-24 0:00 UTC));
    }
}
