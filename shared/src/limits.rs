//! Rate limits per account and the failed-authentication lockout per source address, shared
//! by the api (every request) and the dashboard (sign-in attempts count as failed
//! authentications of their source address).
//!
//! Both live in Redis, so every replica shares them, in Lua scripts (atomic): `lock.lua` checks
//! the lock of the source address, `windows.lua` counts the request against both rate windows
//! of the account. On one server (standalone, or the master Sentinel names) a request runs
//! both in one script, one round trip. On a cluster they are two scripts, two round trips: an
//! address's key and an account's keys cannot share a hash tag, and a script may only use keys
//! of one slot. Windows are fixed and anchored at the first request counted in them; a refused
//! request consumes nothing.
//!
//! When Redis is unreachable the limits fail open: requests are admitted without rate-limit
//! state and a warning is logged, so a Redis outage does not take reads down with it.

use std::{net::IpAddr, time::Duration};

use crate::{
    config::{env_millis, env_positive, ConfigError, RedisMode},
    domain::AccountId,
    redis_conn::RedisConn,
    telemetry,
};

/// Limits that are not part of an account's plan.
#[derive(Debug, Clone)]
pub struct LimitSettings {
    /// `APP_RATE_WINDOW_MS`: length of the per-minute window (default 60000; tests shorten it).
    pub rate_window: Duration,
    /// `APP_RATE_BURST_WINDOW_MS`: length of the burst window, which admits a tenth of the
    /// per-minute limit rounded up (default 1000; tests lengthen it).
    pub burst_window: Duration,
    /// `APP_AUTH_FAILURE_LIMIT`: failed authentications per window that lock an address out
    /// for the rest of the window (default 50).
    pub auth_failure_limit: u32,
    /// `APP_AUTH_FAILURE_WINDOW_MS`: the lockout window (default 60000; tests shorten it).
    pub auth_failure_window: Duration,
    /// `APP_AUTH_CONCURRENCY`: authenticating requests one address may have in flight on one
    /// replica (default 50); one more is refused at once.
    pub auth_concurrency: usize,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            rate_window: Duration::from_secs(60),
            burst_window: Duration::from_secs(1),
            auth_failure_limit: 50,
            auth_failure_window: Duration::from_secs(60),
            auth_concurrency: 50,
        }
    }
}

impl LimitSettings {
    /// Reads the environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        let defaults = Self::default();
        let auth_failure_limit =
            env_positive("APP_AUTH_FAILURE_LIMIT", defaults.auth_failure_limit)?;
        let auth_concurrency = env_positive("APP_AUTH_CONCURRENCY", defaults.auth_concurrency)?;
        Ok(Self {
            rate_window: env_millis("APP_RATE_WINDOW_MS", defaults.rate_window, 1..)?,
            burst_window: env_millis("APP_RATE_BURST_WINDOW_MS", defaults.burst_window, 1..)?,
            auth_failure_limit,
            auth_failure_window: env_millis(
                "APP_AUTH_FAILURE_WINDOW_MS",
                defaults.auth_failure_window,
                1..,
            )?,
            auth_concurrency,
        })
    }
}

/// One rate window's state after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    /// Requests the window admits.
    pub limit: u32,
    /// Requests it still admits.
    pub remaining: u32,
    /// Time until it starts afresh.
    pub reset: Duration,
}

impl WindowState {
    /// Whole seconds until the window starts afresh, at least 1.
    pub fn reset_seconds(&self) -> u64 {
        seconds_ceil(self.reset)
    }
}

/// What the limiter decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The address is locked out after failed authentications, for this long.
    Locked(Duration),
    /// Admitted; the tighter window's state, when Redis answered.
    Admitted(Option<WindowState>),
    /// A rate window is exhausted; its state (remaining 0).
    Limited(WindowState),
}

/// The Redis side of the limits.
pub struct Limiter {
    redis: RedisConn,
    settings: LimitSettings,
    lock: redis::Script,
    windows: redis::Script,
    admit: redis::Script,
}

/// The lock of a source address: `KEYS[1]`, `ARGV[1..=3]` as `lock.lua` says.
const LOCK: &str = concat!(
    include_str!("limits/lock.lua"),
    "return lock(KEYS[1], ARGV[1], ARGV[2], ARGV[3])\n"
);

/// The windows of an account: `KEYS[1]` minute and `KEYS[2]` burst window; `ARGV[1..=4]` the
/// minute limit and length, the burst limit and length.
const WINDOWS: &str = concat!(
    include_str!("limits/windows.lua"),
    "return windows(KEYS[1], ARGV[1], ARGV[2], KEYS[2], ARGV[3], ARGV[4])\n"
);

/// Both, on one server: the lock of `KEYS[1]` (limit and window `ARGV[1..=2]`), and unless it
/// is locked, the windows `KEYS[2..=3]` (`ARGV[3..=6]` as for [`WINDOWS`]).
const ADMIT: &str = concat!(
    include_str!("limits/lock.lua"),
    include_str!("limits/windows.lua"),
    "local locked = lock(KEYS[1], 'check', ARGV[1], ARGV[2])\n",
    "if locked[1] == 1 then return locked end\n",
    "return windows(KEYS[2], ARGV[3], ARGV[4], KEYS[3], ARGV[5], ARGV[6])\n"
);

impl Limiter {
    /// A limiter keeping its counters in `redis`'s namespace.
    pub fn new(redis: RedisConn, settings: LimitSettings) -> Self {
        Self {
            redis,
            settings,
            lock: redis::Script::new(LOCK),
            windows: redis::Script::new(WINDOWS),
            admit: redis::Script::new(ADMIT),
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &LimitSettings {
        &self.settings
    }

    /// Whether `source` is locked out (checked before a key lookup).
    pub async fn check_lock(&self, source: IpAddr) -> Verdict {
        self.run("check", source, None).await
    }

    /// Counts a failed authentication from `source`, unless it is already locked out.
    pub async fn record_failure(&self, source: IpAddr) -> Verdict {
        self.run("fail", source, None).await
    }

    /// Checks the lock of `source`, then counts a request of `account` against both windows.
    pub async fn admit(&self, source: IpAddr, account: AccountId, per_minute: u32) -> Verdict {
        self.run("admit", source, Some((account, per_minute))).await
    }

    /// The key counting failed authentications of `source`.
    pub fn lock_key(&self, source: IpAddr) -> String {
        self.redis.key(&format!("authfail:{source}"))
    }

    /// The keys of `account`'s minute and burst windows, which `windows.lua` uses together
    /// (one hash tag: the account).
    pub fn window_keys(&self, account: AccountId) -> [String; 2] {
        let tag = format!("rate:{account}");
        [
            self.redis.tagged_key(&tag, ":minute"),
            self.redis.tagged_key(&tag, ":burst"),
        ]
    }

    async fn run(&self, mode: &str, source: IpAddr, account: Option<(AccountId, u32)>) -> Verdict {
        let per_minute = account.map_or(1, |(_, rate)| rate.max(1));
        let burst = per_minute.div_ceil(10);
        // The windows' keys and arguments, after the lock's in the script on one server.
        let count_in_windows = |invocation: &mut redis::ScriptInvocation<'_>, account| {
            let [minute_key, burst_key] = self.window_keys(account);
            invocation
                .key(minute_key)
                .key(burst_key)
                .arg(per_minute)
                .arg(millis(self.settings.rate_window))
                .arg(burst)
                .arg(millis(self.settings.burst_window));
        };
        let one_server = *self.redis.mode() != RedisMode::Cluster;
        if let Some((account, _)) = account.filter(|_| one_server) {
            let mut admit = self.admit.prepare_invoke();
            admit
                .key(self.lock_key(source))
                .arg(self.settings.auth_failure_limit)
                .arg(millis(self.settings.auth_failure_window));
            count_in_windows(&mut admit, account);
            return match self.invoke(admit).await {
                Some(reply) => interpret(&reply, per_minute, burst),
                None => Verdict::Admitted(None),
            };
        }
        let mut lock = self.lock.prepare_invoke();
        lock.key(self.lock_key(source))
            .arg(if mode == "fail" { "fail" } else { "check" })
            .arg(self.settings.auth_failure_limit)
            .arg(millis(self.settings.auth_failure_window));
        let Some(reply) = self.invoke(lock).await else {
            return Verdict::Admitted(None);
        };
        let verdict = interpret(&reply, per_minute, burst);
        let Some((account, _)) = account.filter(|_| verdict == Verdict::Admitted(None)) else {
            return verdict;
        };
        let mut windows = self.windows.prepare_invoke();
        count_in_windows(&mut windows, account);
        match self.invoke(windows).await {
            Some(reply) => interpret(&reply, per_minute, burst),
            None => Verdict::Admitted(None),
        }
    }

    /// Runs a script; `None` (logged and counted) when Redis failed, so the limits fail open.
    async fn invoke(&self, invocation: redis::ScriptInvocation<'_>) -> Option<Vec<i64>> {
        let reply = self
            .redis
            .with(|mut conn| async move { invocation.invoke_async::<Vec<i64>>(&mut conn).await })
            .await;
        match reply {
            Ok(reply) => Some(reply),
            Err(err) => {
                tracing::warn!(error = %err, "Rate limits unavailable; admitting the request");
                metrics::counter!(telemetry::RATE_LIMIT_UNAVAILABLE_TOTAL).increment(1);
                None
            }
        }
    }
}

/// Reads a script's reply: `lock.lua`'s ({1, ttl} locked, {0} not) or `windows.lua`'s.
fn interpret(reply: &[i64], per_minute: u32, burst: u32) -> Verdict {
    let at = |i: usize| reply.get(i).copied().unwrap_or(0);
    match at(0) {
        1 => Verdict::Locked(Duration::from_millis(positive(at(1)))),
        _ if reply.len() < 5 => Verdict::Admitted(None),
        outcome => {
            let window = |limit: u32, used: i64, ttl: i64| WindowState {
                limit,
                remaining: limit.saturating_sub(u32::try_from(used.max(0)).unwrap_or(u32::MAX)),
                reset: Duration::from_millis(positive(ttl)),
            };
            let minute = window(per_minute, at(1), at(2));
            let burst = window(burst, at(3), at(4));
            if outcome == 2 {
                Verdict::Limited(refusing(minute, burst))
            } else {
                Verdict::Admitted(Some(tighter(minute, burst)))
            }
        }
    }
}

/// The window to report: the one with fewer requests left, or on a tie the one that starts
/// afresh later.
pub fn tighter(a: WindowState, b: WindowState) -> WindowState {
    match a.remaining.cmp(&b.remaining) {
        std::cmp::Ordering::Less => a,
        std::cmp::Ordering::Greater => b,
        std::cmp::Ordering::Equal if a.reset >= b.reset => a,
        std::cmp::Ordering::Equal => b,
    }
}

/// The window that refused: of the exhausted ones, the one that stays exhausted longest.
fn refusing(minute: WindowState, burst: WindowState) -> WindowState {
    let exhausted = |w: WindowState| (w.remaining == 0).then_some(w);
    match (exhausted(minute), exhausted(burst)) {
        (Some(m), Some(b)) => {
            if m.reset >= b.reset {
                m
            } else {
                b
            }
        }
        (Some(m), None) => m,
        (None, Some(b)) => b,
        (None, None) => tighter(minute, burst),
    }
}

fn positive(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whole seconds, rounded up, at least 1: the unit of `retry-after` and `x-ratelimit-reset`.
pub fn seconds_ceil(d: Duration) -> u64 {
    u64::try_from(d.as_millis().div_ceil(1000))
        .unwrap_or(u64::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(limit: u32, remaining: u32, reset_ms: u64) -> WindowState {
        WindowState {
            limit,
            remaining,
            reset: Duration::from_millis(reset_ms),
        }
    }

    #[test]
    fn the_windows_of_an_account_are_in_one_cluster_slot() {
        for redis in crate::redis_conn::tests::test_conns() {
            let limiter = Limiter::new(redis, LimitSettings::default());
            for account in [
                AccountId(uuid::Uuid::nil()),
                AccountId(uuid::Uuid::new_v4()),
            ] {
                crate::redis_conn::tests::assert_one_slot(&limiter.window_keys(account));
            }
        }
    }

    #[test]
    fn seconds_round_up_and_never_reach_zero() {
        assert_eq!(seconds_ceil(Duration::ZERO), 1);
        assert_eq!(seconds_ceil(Duration::from_millis(1)), 1);
        assert_eq!(seconds_ceil(Duration::from_millis(1000)), 1);
        assert_eq!(seconds_ceil(Duration::from_millis(1001)), 2);
        assert_eq!(seconds_ceil(Duration::from_secs(60)), 60);
    }

    #[test]
    fn the_window_with_fewer_requests_left_is_reported() {
        assert_eq!(tighter(w(60, 59, 60_000), w(6, 5, 1000)), w(6, 5, 1000));
        assert_eq!(tighter(w(60, 3, 9_000), w(6, 5, 1000)), w(60, 3, 9_000));
    }

    #[test]
    fn on_a_tie_the_window_resetting_later_is_reported() {
        assert_eq!(tighter(w(60, 5, 9_000), w(6, 5, 1000)), w(60, 5, 9_000));
    }

    #[test]
    fn an_admitted_reply_reports_the_tighter_window() {
        let verdict = interpret(&[0, 1, 60_000, 1, 1000], 60, 6);
        assert_eq!(verdict, Verdict::Admitted(Some(w(6, 5, 1000))));
    }

    #[test]
    fn a_refused_reply_reports_the_exhausted_window() {
        assert_eq!(
            interpret(&[2, 60, 42_000, 2, 500], 60, 6),
            Verdict::Limited(w(60, 0, 42_000))
        );
        assert_eq!(
            interpret(&[2, 10, 42_000, 6, 500], 60, 6),
            Verdict::Limited(w(6, 0, 500))
        );
    }

    #[test]
    fn a_locked_reply_carries_the_time_left() {
        assert_eq!(
            interpret(&[1, 1500], 60, 6),
            Verdict::Locked(Duration::from_millis(1500))
        );
        assert_eq!(interpret(&[0], 60, 6), Verdict::Admitted(None));
    }
}
