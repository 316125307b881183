//! A dashboard user's own settings, kept in Redis beside the sessions (not in Postgres: they
//! change nothing of the account and nobody else reads them).
//!
//! One for now: whether the review page shows images and video frames unblurred at once.
//! Media is blurred unless the user turned that off, and a lost Redis key means blurred again:
//! the safe side. The setting lasts across sessions (no expiry) and is the user's own, so
//! signing in elsewhere keeps it.

use moderation_shared::{domain::DashboardUserId, redis_conn::RedisConn};
use redis::AsyncCommands;

use crate::error::DashboardError;

/// The field of a user's settings hash saying media is shown unblurred.
const UNBLURRED_MEDIA: &str = "unblurred_media";

/// The users' settings (Redis).
pub struct Preferences {
    redis: RedisConn,
}

impl Preferences {
    /// Settings in `redis`'s namespace.
    pub fn new(redis: RedisConn) -> Self {
        Self { redis }
    }

    /// Whether `user` sees review media blurred and in grayscale until revealed (the
    /// default).
    pub async fn blurs_media(&self, user: DashboardUserId) -> Result<bool, DashboardError> {
        let key = self.key(user);
        let unblurred: Option<String> = self
            .redis
            .with(|mut conn| async move { conn.hget(key, UNBLURRED_MEDIA).await })
            .await
            .map_err(anyhow::Error::from)?;
        Ok(unblurred.is_none())
    }

    /// Sets whether `user` sees review media blurred until revealed.
    pub async fn set_blurs_media(
        &self,
        user: DashboardUserId,
        blur: bool,
    ) -> Result<(), DashboardError> {
        let key = self.key(user);
        self.redis
            .with(|mut conn| async move {
                if blur {
                    conn.hdel::<_, _, ()>(key, UNBLURRED_MEDIA).await
                } else {
                    conn.hset::<_, _, _, ()>(key, UNBLURRED_MEDIA, "1").await
                }
            })
            .await
            .map_err(anyhow::Error::from)?;
        Ok(())
    }

    /// `<namespace>:dashboard:prefs:<user id>`, a hash of the user's settings.
    fn key(&self, user: DashboardUserId) -> String {
        self.redis.key(&format!("dashboard:prefs:{}", user.0))
    }
}
