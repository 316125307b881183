//! The daily check quota: one Redis counter per account per UTC day.
//!
//! One Lua script increments the counter and, when it creates it, sets its expiry to the next
//! midnight UTC: one command per check, atomic, so the counter is shared by every api replica
//! and can never be left without an expiry.

use std::sync::LazyLock;

use redis::{RedisResult, Script};
use time::OffsetDateTime;

use super::signals::utc_day;
use crate::{domain::AccountId, redis_conn::RedisConn};

/// Counts one check for `account` on the UTC day of `now`; returns the count including it.
pub async fn count_check(
    redis: &RedisConn,
    account: AccountId,
    now: OffsetDateTime,
) -> RedisResult<u64> {
    let day = utc_day(now);
    let key = redis.key(&format!(
        "registry:checks:{account}:{}",
        day.unix_timestamp()
    ));
    let reset = next_midnight(now).unix_timestamp();
    static COUNT: LazyLock<Script> = LazyLock::new(|| {
        Script::new(
            "local n = redis.call('INCR', KEYS[1]) \
             if n == 1 then redis.call('EXPIREAT', KEYS[1], ARGV[1]) end \
             return n",
        )
    });
    let mut invocation = COUNT.prepare_invoke();
    invocation.key(key).arg(reset);
    redis
        .with(|mut conn| async move { invocation.invoke_async::<u64>(&mut conn).await })
        .await
}

/// The next midnight UTC after `now`.
pub fn next_midnight(now: OffsetDateTime) -> OffsetDateTime {
    utc_day(now) + time::Duration::DAY
}

/// Whole seconds from `now` until the quota resets (at least 1), for `retry-after`.
pub fn seconds_until_reset(now: OffsetDateTime) -> u64 {
    let remaining = next_midnight(now) - now;
    let whole = remaining.whole_seconds();
    let rounded_up = if remaining.subsec_nanoseconds() > 0 {
        whole + 1
    } else {
        whole
    };
    u64::try_from(rounded_up).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn the_quota_resets_at_the_next_utc_midnight() {
        assert_eq!(
            next_midnight(datetime!(2026-11-22 23:59:59.5 UTC)),
            datetime!(2026-11-23 00:00 UTC)
        );
        assert_eq!(
            next_midnight(datetime!(2026-11-22 00:00 UTC)),
            datetime!(2026-11-23 00:00 UTC)
        );
    }

    #[test]
    fn retry_after_rounds_up_and_is_at_least_one_second() {
        assert_eq!(seconds_until_reset(datetime!(2026-11-22 23:59:59.5 UTC)), 1);
        assert_eq!(
            seconds_until_reset(datetime!(2026-11-22 23:59:59.999_999 UTC)),
            1
        );
        assert_eq!(seconds_until_reset(datetime!(2026-11-22 23:59:00 UTC)), 60);
        assert_eq!(seconds_until_reset(datetime!(2026-11-22 00:00 UTC)), 86_400);
    }
}
