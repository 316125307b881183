//! The 12-attempt schedule, as data.

use std::time::Duration;

use time::OffsetDateTime;

const MINUTE: u64 = 60;

/// The wait before each attempt: attempt 1 at once, then 30 s, 1, 2, 4, 8, 16 and 32 minutes,
/// then hourly; 12 attempts in all (about five hours).
pub const DEFAULT_DELAYS: [Duration; 12] = [
    Duration::ZERO,
    Duration::from_secs(30),
    Duration::from_secs(MINUTE),
    Duration::from_secs(2 * MINUTE),
    Duration::from_secs(4 * MINUTE),
    Duration::from_secs(8 * MINUTE),
    Duration::from_secs(16 * MINUTE),
    Duration::from_secs(32 * MINUTE),
    Duration::from_secs(60 * MINUTE),
    Duration::from_secs(60 * MINUTE),
    Duration::from_secs(60 * MINUTE),
    Duration::from_secs(60 * MINUTE),
];

/// A schedule: the wait before each of the 12 attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    delays: [Duration; 12],
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            delays: DEFAULT_DELAYS,
        }
    }
}

impl Schedule {
    /// The default schedule with every delay multiplied by `scale`
    /// (`APP_WEBHOOK_SCHEDULE_SCALE`; tests use 0.001: 30 ms, 60 ms, …).
    pub fn scaled(scale: f64) -> Self {
        Self {
            delays: DEFAULT_DELAYS.map(|d| d.mul_f64(scale)),
        }
    }

    /// How many attempts a delivery gets: one per delay.
    pub fn attempts(&self) -> usize {
        self.delays.len()
    }

    /// When attempt `attempt + 1` is due, given that attempt `attempt` (1-based) ended at
    /// `ended_at`; `None` after the last attempt. Each retry waits its whole delay from when the
    /// previous attempt actually ended, so a dispatcher that was down or behind never fires the
    /// overdue retries of a failing receiver in a burst.
    pub fn next_after(&self, attempt: i32, ended_at: OffsetDateTime) -> Option<OffsetDateTime> {
        let next = usize::try_from(attempt).ok()?;
        self.delays.get(next).map(|delay| ended_at + *delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn the_default_schedule_follows_the_spec_offsets_and_stops_after_twelve() {
        let start = datetime!(2026-01-01 00:00 UTC);
        let schedule = Schedule::default();
        let mut at = start;
        let mut offsets = Vec::new();
        let mut attempt = 1;
        while let Some(next) = schedule.next_after(attempt, at) {
            offsets.push((next - at).whole_seconds());
            at = next;
            attempt += 1;
        }
        assert_eq!(attempt, 12);
        assert_eq!(schedule.attempts(), 12);
        assert_eq!(
            offsets,
            [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600, 3600]
        );
        let total = at - start;
        assert!(total.whole_minutes() > 4 * 60 && total.whole_minutes() < 6 * 60);
    }

    #[test]
    fn scaling_multiplies_every_delay() {
        let start = datetime!(2026-01-01 00:00 UTC);
        let next = Schedule::scaled(0.001).next_after(1, start).unwrap();
        assert_eq!((next - start).whole_milliseconds(), 30);
    }
}
