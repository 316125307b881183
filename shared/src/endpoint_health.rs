//! Webhook endpoint health (contract 17): the state of an account's webhook URL, kept from the
//! attempts made to it, and its settings. Pure: the database module of the endpoints loads,
//! saves and audits what is decided here.

use std::time::Duration;

use time::OffsetDateTime;

use crate::{
    config::{env_bool, env_or, ConfigError},
    domain::{DisabledReason, EndpointState, OperatorEvent},
};

/// `APP_WEBHOOK_DISABLE_AFTER_S` by default: 72 hours.
const DISABLE_AFTER: Duration = Duration::from_secs(72 * 3600);
/// `APP_WEBHOOK_DISABLE_MIN_FAILURES` by default.
const DISABLE_MIN_FAILURES: i32 = 36;
/// `APP_WEBHOOK_HOLD_S` by default: 7 days.
const HOLD: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long before `disable_at` the second `endpoint.failing` notice is sent, and how often
/// at most the one on entering `failing` is: a day.
const DAY: Duration = Duration::from_secs(24 * 3600);

/// When a URL is disabled on its own and how long held deliveries are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSettings {
    /// `APP_WEBHOOK_AUTO_DISABLE` (default true): `false` turns automatic disabling off (by
    /// time and count, and on 410).
    pub auto_disable: bool,
    /// `APP_WEBHOOK_DISABLE_AFTER_S` (default 259 200, 72 h): how long a URL fails before it
    /// is disabled.
    pub disable_after: Duration,
    /// `APP_WEBHOOK_DISABLE_MIN_FAILURES` (default 36): the failed attempts since
    /// `failing_since` it also takes.
    pub disable_min_failures: i32,
    /// `APP_WEBHOOK_HOLD_S` (default 604 800, 7 days): how long a held delivery is kept before
    /// it is abandoned.
    pub hold: Duration,
    /// How long before `disable_at` the warning goes out (a day; tests scale it).
    pub warn_before: Duration,
    /// The least time between two `endpoint.failing` notices on entering `failing` (a day;
    /// tests scale it).
    pub failing_notice_every: Duration,
}

impl Default for HealthSettings {
    fn default() -> Self {
        Self {
            auto_disable: true,
            disable_after: DISABLE_AFTER,
            disable_min_failures: DISABLE_MIN_FAILURES,
            hold: HOLD,
            warn_before: DAY,
            failing_notice_every: DAY,
        }
    }
}

impl HealthSettings {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        let seconds = |name, default: Duration| -> Result<Duration, ConfigError> {
            let value: u64 = env_or(name, default.as_secs())?;
            if value == 0 {
                return Err(ConfigError::new(name, "must be at least 1"));
            }
            Ok(Duration::from_secs(value))
        };
        let disable_min_failures =
            env_or("APP_WEBHOOK_DISABLE_MIN_FAILURES", DISABLE_MIN_FAILURES)?;
        if disable_min_failures < 1 {
            return Err(ConfigError::new(
                "APP_WEBHOOK_DISABLE_MIN_FAILURES",
                "must be at least 1",
            ));
        }
        Ok(Self {
            auto_disable: env_bool("APP_WEBHOOK_AUTO_DISABLE", true)?,
            disable_after: seconds("APP_WEBHOOK_DISABLE_AFTER_S", DISABLE_AFTER)?,
            disable_min_failures,
            hold: seconds("APP_WEBHOOK_HOLD_S", HOLD)?,
            ..Self::default()
        })
    }
}

/// The latest failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFailure {
    /// When it ended.
    pub at: OffsetDateTime,
    /// The answer's status, if one came.
    pub status_code: Option<i32>,
    /// What went wrong.
    pub error: String,
}

/// How an attempt to the URL ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    /// A 2xx.
    Acknowledged,
    /// Anything else: a non-2xx status, or no answer.
    Failed {
        /// The status, if an answer came.
        status_code: Option<i32>,
        /// What went wrong.
        error: String,
    },
}

/// A URL's health (the state columns of `webhook_endpoints`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// Its state.
    pub state: EndpointState,
    /// Why it is disabled (only while `disabled`).
    pub disabled_reason: Option<DisabledReason>,
    /// The first failed attempt with no 2xx after it (while `failing`, and kept when it is
    /// disabled automatically).
    pub failing_since: Option<OffsetDateTime>,
    /// Failed attempts since `failing_since`.
    pub failures_since: i32,
    /// The latest 2xx.
    pub last_success_at: Option<OffsetDateTime>,
    /// The latest failed attempt.
    pub last_failure: Option<LastFailure>,
    /// The latest `endpoint.failing` notice on entering `failing`.
    pub failing_noticed_at: Option<OffsetDateTime>,
    /// When the warning before `disable_at` went out for this `failing_since`.
    pub warned_at: Option<OffsetDateTime>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            state: EndpointState::Active,
            disabled_reason: None,
            failing_since: None,
            failures_since: 0,
            last_success_at: None,
            last_failure: None,
            failing_noticed_at: None,
            warned_at: None,
        }
    }
}

impl Health {
    /// When a `failing` URL will be disabled automatically (`failing_since` plus
    /// `disable_after`, once it has failed often enough); `None` in any other state or with
    /// automatic disabling off.
    pub fn disable_at(&self, settings: &HealthSettings) -> Option<OffsetDateTime> {
        match (self.state, self.failing_since) {
            (EndpointState::Failing, Some(since)) if settings.auto_disable => {
                Some(since + settings.disable_after)
            }
            _ => None,
        }
    }

    /// Applies an attempt that ended at `at`; returns the notices it calls for. Only an
    /// `active` or `failing` URL changes state: a ping or a resend to a disabled or paused
    /// URL is only noted.
    pub fn after_attempt(
        &mut self,
        at: OffsetDateTime,
        attempted: Attempted,
        settings: &HealthSettings,
    ) -> Vec<OperatorEvent> {
        let tracked = matches!(self.state, EndpointState::Active | EndpointState::Failing);
        match attempted {
            Attempted::Acknowledged => {
                self.last_success_at = Some(self.last_success_at.map_or(at, |last| last.max(at)));
                if self.state == EndpointState::Failing {
                    self.state = EndpointState::Active;
                    self.failing_since = None;
                    self.failures_since = 0;
                    self.warned_at = None;
                    return vec![OperatorEvent::EndpointRecovered];
                }
                Vec::new()
            }
            Attempted::Failed { status_code, error } => {
                self.last_failure = Some(LastFailure {
                    at,
                    status_code,
                    error,
                });
                if !tracked {
                    return Vec::new();
                }
                let mut events = Vec::new();
                if self.state == EndpointState::Active {
                    self.state = EndpointState::Failing;
                    self.failing_since = Some(at);
                    self.failures_since = 0;
                    self.warned_at = None;
                    let noticed_lately = self
                        .failing_noticed_at
                        .is_some_and(|noticed| at - noticed < settings.failing_notice_every);
                    if !noticed_lately && status_code != Some(410) {
                        self.failing_noticed_at = Some(at);
                        events.push(OperatorEvent::EndpointFailing);
                        // With `disable_at` less than a day away already, this notice is
                        // also the warning.
                        if self.warning_due(at, settings) {
                            self.warned_at = Some(at);
                        }
                    }
                }
                self.failures_since = self.failures_since.saturating_add(1);
                if settings.auto_disable && status_code == Some(410) {
                    events.retain(|e| *e != OperatorEvent::EndpointFailing);
                    self.disable(DisabledReason::Gone);
                    events.push(OperatorEvent::EndpointDisabled);
                } else if self.disable_due(at, settings) {
                    self.disable(DisabledReason::Auto);
                    events.push(OperatorEvent::EndpointDisabled);
                }
                events
            }
        }
    }

    /// Whether a `failing` URL is due for its automatic disable at `now`.
    pub fn disable_due(&self, now: OffsetDateTime, settings: &HealthSettings) -> bool {
        self.failures_since >= settings.disable_min_failures
            && self.disable_at(settings).is_some_and(|at| now >= at)
    }

    /// Whether the warning a day before `disable_at` is due at `now` (and not yet sent).
    pub fn warning_due(&self, now: OffsetDateTime, settings: &HealthSettings) -> bool {
        self.warned_at.is_none()
            && self
                .disable_at(settings)
                .is_some_and(|at| now >= at - settings.warn_before)
    }

    /// The sweep's step at `now` for a `failing` URL: its automatic disable, or the warning
    /// before it, when due.
    pub fn sweep(&mut self, now: OffsetDateTime, settings: &HealthSettings) -> Vec<OperatorEvent> {
        if self.disable_due(now, settings) {
            self.disable(DisabledReason::Auto);
            vec![OperatorEvent::EndpointDisabled]
        } else if self.warning_due(now, settings) {
            self.warned_at = Some(now);
            vec![OperatorEvent::EndpointFailing]
        } else {
            Vec::new()
        }
    }

    /// Disables the URL for `reason` (`failing_since` is kept: it tells since when).
    pub fn disable(&mut self, reason: DisabledReason) {
        self.state = EndpointState::Disabled;
        self.disabled_reason = Some(reason);
    }

    /// Pauses the URL (the account asked).
    pub fn pause(&mut self) {
        self.state = EndpointState::Paused;
        self.disabled_reason = None;
    }

    /// Makes the URL `active` again with a clean record of failures (enable or resume).
    pub fn activate(&mut self) {
        self.state = EndpointState::Active;
        self.disabled_reason = None;
        self.failing_since = None;
        self.failures_since = 0;
        self.warned_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

    fn failed(code: i32) -> Attempted {
        Attempted::Failed {
            status_code: Some(code),
            error: format!("answered {code}"),
        }
    }

    #[test]
    fn the_first_failure_makes_an_active_url_failing_and_a_2xx_recovers_it() {
        let settings = HealthSettings::default();
        let mut health = Health::default();
        let events = health.after_attempt(T0, failed(500), &settings);
        assert_eq!(events, [OperatorEvent::EndpointFailing]);
        assert_eq!(health.state, EndpointState::Failing);
        assert_eq!(health.failing_since, Some(T0));
        assert_eq!(health.failures_since, 1);
        assert_eq!(health.disable_at(&settings), Some(T0 + DISABLE_AFTER));
        health.after_attempt(T0 + Duration::from_secs(1), failed(500), &settings);
        assert_eq!(health.failures_since, 2);
        assert_eq!(health.failing_since, Some(T0));
        let events = health.after_attempt(
            T0 + Duration::from_secs(2),
            Attempted::Acknowledged,
            &settings,
        );
        assert_eq!(events, [OperatorEvent::EndpointRecovered]);
        assert_eq!(health.state, EndpointState::Active);
        assert_eq!(health.failing_since, None);
        assert_eq!(health.disable_at(&settings), None);
    }

    #[test]
    fn disabling_takes_both_the_time_and_the_count() {
        let settings = HealthSettings {
            disable_after: Duration::from_secs(100),
            disable_min_failures: 3,
            ..HealthSettings::default()
        };
        let mut health = Health::default();
        health.after_attempt(T0, failed(500), &settings);
        health.after_attempt(T0 + Duration::from_secs(50), failed(500), &settings);
        assert!(
            !health.disable_due(T0 + Duration::from_secs(200), &settings),
            "two are too few"
        );
        let events = health.after_attempt(T0 + Duration::from_secs(99), failed(500), &settings);
        assert_eq!(
            health.state,
            EndpointState::Failing,
            "not yet 100 s: {events:?}"
        );
        assert!(!health.disable_due(T0 + Duration::from_millis(99_999), &settings));
        assert!(health.disable_due(T0 + Duration::from_secs(100), &settings));
        let events = health.sweep(T0 + Duration::from_secs(100), &settings);
        assert_eq!(events, [OperatorEvent::EndpointDisabled]);
        assert_eq!(health.state, EndpointState::Disabled);
        assert_eq!(health.disabled_reason, Some(DisabledReason::Auto));
    }

    #[test]
    fn a_410_disables_at_once_unless_auto_disable_is_off() {
        let mut health = Health::default();
        let events = health.after_attempt(T0, failed(410), &HealthSettings::default());
        assert_eq!(events, [OperatorEvent::EndpointDisabled]);
        assert_eq!(health.disabled_reason, Some(DisabledReason::Gone));
        let off = HealthSettings {
            auto_disable: false,
            disable_after: Duration::from_secs(1),
            disable_min_failures: 1,
            ..HealthSettings::default()
        };
        let mut health = Health::default();
        health.after_attempt(T0, failed(410), &off);
        health.after_attempt(T0 + Duration::from_secs(5), failed(410), &off);
        assert_eq!(health.state, EndpointState::Failing);
        assert_eq!(health.disable_at(&off), None);
        assert!(health.sweep(T0 + Duration::from_secs(10), &off).is_empty());
    }

    #[test]
    fn the_warning_goes_once_a_day_before_disable_at_and_entering_failing_notices_once_a_day() {
        let settings = HealthSettings::default();
        let mut health = Health::default();
        health.after_attempt(T0, failed(500), &settings);
        let warn_at = T0 + DISABLE_AFTER - DAY;
        assert!(health
            .sweep(warn_at - Duration::from_secs(1), &settings)
            .is_empty());
        assert_eq!(
            health.sweep(warn_at, &settings),
            [OperatorEvent::EndpointFailing]
        );
        assert!(health.sweep(warn_at, &settings).is_empty());
        health.after_attempt(warn_at, Attempted::Acknowledged, &settings);
        let again = health.after_attempt(warn_at + Duration::from_secs(1), failed(500), &settings);
        assert!(again.contains(&OperatorEvent::EndpointFailing), "{again:?}");
        health.after_attempt(
            warn_at + Duration::from_secs(2),
            Attempted::Acknowledged,
            &settings,
        );
        let soon = health.after_attempt(warn_at + Duration::from_secs(3), failed(500), &settings);
        assert!(soon.is_empty(), "at most once a day: {soon:?}");
    }

    #[test]
    fn entering_failing_less_than_a_day_before_disable_at_sends_one_notice() {
        let settings = HealthSettings {
            disable_after: Duration::from_secs(3600),
            ..HealthSettings::default()
        };
        let mut health = Health::default();
        let events = health.after_attempt(T0, failed(500), &settings);
        assert_eq!(events, [OperatorEvent::EndpointFailing]);
        assert!(health
            .sweep(T0 + Duration::from_secs(1), &settings)
            .is_empty());
    }

    #[test]
    fn attempts_to_a_paused_or_disabled_url_change_no_state() {
        let settings = HealthSettings::default();
        let mut health = Health::default();
        health.pause();
        assert!(health.after_attempt(T0, failed(410), &settings).is_empty());
        assert_eq!(health.state, EndpointState::Paused);
        assert!(health.last_failure.is_some());
        health.after_attempt(T0, Attempted::Acknowledged, &settings);
        assert_eq!(health.state, EndpointState::Paused);
        assert_eq!(health.last_success_at, Some(T0));
    }
}
