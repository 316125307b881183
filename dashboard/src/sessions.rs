//! The Redis side of sessions, and the dashboard's cookies.
//!
//! The cookie holds only a random token; Redis holds, under the token's SHA-256, the user and
//! the session's CSRF token, for [`SESSION_TTL`]. One-time notices (a new key's full value) are
//! kept beside the session and taken on read. The `Session` extractor turns a cookie into a
//! signed-in person.

use std::time::Duration;

use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use moderation_shared::{domain::DashboardUserId, redis_conn::RedisConn};
use redis::AsyncCommands;
use ring::{
    digest,
    rand::{SecureRandom, SystemRandom},
};
use serde::{Deserialize, Serialize};

use crate::error::DashboardError;

/// The session cookie.
pub const COOKIE: &str = "dashboard_session";
/// How long a session lasts from sign-in.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// How long a one-time notice waits to be shown.
const NOTICE_TTL: Duration = Duration::from_secs(300);

/// What Redis keeps for a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stored {
    /// Who signed in.
    pub user_id: DashboardUserId,
    /// The session's CSRF token.
    pub csrf: String,
}

/// The Redis side of sessions.
pub struct SessionStore {
    redis: RedisConn,
}

impl SessionStore {
    /// Sessions in `redis`'s namespace.
    pub fn new(redis: RedisConn) -> Self {
        Self { redis }
    }

    /// Opens a session for `user`; its cookie token.
    pub async fn open(&self, user: DashboardUserId) -> Result<String, DashboardError> {
        let token = random_token()?;
        let stored = Stored {
            user_id: user,
            csrf: random_token()?,
        };
        let value = serde_json::to_string(&stored).map_err(anyhow::Error::from)?;
        let key = self.key("session", &token);
        self.redis
            .with(|mut conn| async move {
                conn.set_ex::<_, _, ()>(key, value, SESSION_TTL.as_secs())
                    .await
            })
            .await
            .map_err(anyhow::Error::from)?;
        Ok(token)
    }

    /// Ends the session of `token`, and drops its notices.
    pub async fn close(&self, token: &str) -> Result<(), DashboardError> {
        let keys = self.keys(token);
        self.redis
            .with(|mut conn| async move { conn.del::<_, ()>(&keys).await })
            .await
            .map_err(anyhow::Error::from)?;
        Ok(())
    }

    /// What Redis keeps for the session of `token`, if it is open.
    pub async fn load(&self, token: &str) -> Result<Option<Stored>, DashboardError> {
        let key = self.key("session", token);
        let raw: Option<String> = self
            .redis
            .with(|mut conn| async move { conn.get(key).await })
            .await
            .map_err(anyhow::Error::from)?;
        Ok(raw.and_then(|raw| serde_json::from_str(&raw).ok()))
    }

    /// Keeps `text` for the session of `token`, to be shown once by [`Self::take_notice`].
    pub async fn put_notice(&self, token: &str, text: &str) -> Result<(), DashboardError> {
        let key = self.key("notice", token);
        let text = text.to_owned();
        self.redis
            .with(|mut conn| async move {
                conn.set_ex::<_, _, ()>(key, text, NOTICE_TTL.as_secs())
                    .await
            })
            .await
            .map_err(anyhow::Error::from)?;
        Ok(())
    }

    /// Takes the notice kept for the session of `token`: a second call finds nothing.
    pub async fn take_notice(&self, token: &str) -> Result<Option<String>, DashboardError> {
        let key = self.key("notice", token);
        Ok(self
            .redis
            .with(|mut conn| async move { conn.get_del(key).await })
            .await
            .map_err(anyhow::Error::from)?)
    }

    /// Tokens are stored by their hash: a read of Redis does not yield a usable cookie. The
    /// keys of one token share a hash tag, so [`Self::close`] deletes them in one command on a
    /// cluster too.
    fn key(&self, kind: &str, token: &str) -> String {
        let hash = digest::digest(&digest::SHA256, token.as_bytes());
        self.redis.tagged_key(
            &format!("dashboard:{}", hex::encode(hash.as_ref())),
            &format!(":{kind}"),
        )
    }

    /// The keys [`Self::close`] deletes together.
    fn keys(&self, token: &str) -> [String; 2] {
        [self.key("session", token), self.key("notice", token)]
    }
}

/// 32 random bytes, hex: a session token or a CSRF token.
pub fn random_token() -> Result<String, DashboardError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow::anyhow!("the system random source failed"))?;
    Ok(hex::encode(bytes))
}

/// A cookie with the dashboard's attributes: `HttpOnly`, `SameSite=Strict`, path `/`, and
/// `Secure` unless `insecure` (development over plain HTTP).
pub fn cookie(name: &'static str, value: String, insecure: bool) -> Cookie<'static> {
    Cookie::build(name, value)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(!insecure)
        .finish()
}

/// The cookie that removes `name`.
pub fn removal(name: &'static str, insecure: bool) -> Cookie<'static> {
    let mut gone = cookie(name, String::new(), insecure);
    gone.set_max_age(CookieDuration::ZERO);
    gone
}

#[cfg(test)]
mod tests {
    use moderation_shared::{config::RedisSettings, redis_conn::one_slot};

    use super::*;

    #[test]
    fn the_keys_closed_together_are_in_one_cluster_slot() {
        for namespace in ["moderation", "test-0123456789abcdef"] {
            let redis = RedisConn::new(&RedisSettings::new("redis://127.0.0.1:1", namespace))
                .expect("settings");
            let sessions = SessionStore::new(redis);
            for token in ["a", "0123456789abcdef0123456789abcdef"] {
                let keys = sessions.keys(token);
                assert!(one_slot(&keys), "{keys:?}");
            }
        }
    }
}
