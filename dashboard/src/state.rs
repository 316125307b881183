//! State shared by every request handler.

use moderation_shared::{
    client_ip::TrustedProxies, crypto::SealingKey, db::Pool, limits::Limiter, queue::JobQueue,
    url_guard::UrlGuard,
};

use crate::sessions::SessionStore;

/// Held in `web::Data` by every worker thread.
pub struct AppState {
    /// Postgres pool.
    pub pool: Pool,
    /// Sessions and one-time notices (Redis).
    pub sessions: SessionStore,
    /// The failed-authentication lockout shared with the api.
    pub limiter: Limiter,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: TrustedProxies,
    /// The producer side of the job queue, for submissions.
    pub queue: JobQueue,
    /// Checks submitted media URLs.
    pub url_guard: UrlGuard,
    /// Opens and seals webhook signing secrets.
    pub encryption_key: SealingKey,
    /// An Argon2id hash no password matches: a sign-in for an unknown address verifies
    /// against it, so both take as long.
    pub decoy_hash: String,
    /// Whether cookies go without `Secure` (development over plain HTTP).
    pub insecure_cookies: bool,
}
