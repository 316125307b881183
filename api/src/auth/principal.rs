//! Who is calling: the [`Principal`] extractor, the key lookup behind it ([`Authenticator`]),
//! and the rules a found key and its scopes must pass.

use std::{sync::Arc, time::Duration};

use actix_web::{dev::Payload, FromRequest, HttpMessage, HttpRequest};
use moderation_shared::{
    clock,
    db::{api_keys, api_keys::KeyPrincipal, audit_events::Actor, Pool},
    domain::{AccountId, ApiKeyId, Scope},
    keys,
};

use super::access::Access;
use crate::error::ApiError;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Principal {
    /// The key used.
    pub key_id: ApiKeyId,
    /// The account it belongs to.
    pub account_id: AccountId,
    /// The key's scopes.
    pub scopes: Arc<[Scope]>,
    /// The account's requests-per-minute limit.
    pub rate_per_minute: u32,
    /// The account's daily registry check quota.
    pub check_quota_daily: u32,
    /// Whether the account's NSFW check is on.
    pub nsfw_check: bool,
    /// Whether the account is a registry member.
    pub registry_member: bool,
}

impl Principal {
    /// The key, as the audit log names who made a change.
    pub fn actor(&self) -> Actor {
        Actor::Key(self.key_id)
    }
}

impl FromRequest for Principal {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(
            req.extensions()
                .get::<Principal>()
                .cloned()
                .ok_or(ApiError::Unauthorized("missing bearer key")),
        )
    }
}

/// Key lookup by hash, with a short in-process cache.
pub struct Authenticator {
    pool: Pool,
    cache: moka::sync::Cache<[u8; 32], Arc<KeyPrincipal>>,
}

impl Authenticator {
    /// A lookup through `pool`, trusting a cached key for `ttl`.
    pub fn new(pool: Pool, ttl: Duration) -> Self {
        Self {
            pool,
            cache: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The key of `hash` if this replica looked it up within the cache's lifetime.
    pub fn cached(&self, hash: &[u8; 32]) -> Option<Arc<KeyPrincipal>> {
        self.cache.get(hash)
    }

    /// Looks the key of `hash` up in Postgres (and caches it when found).
    pub async fn lookup(&self, hash: &[u8; 32]) -> Result<Option<Arc<KeyPrincipal>>, ApiError> {
        let client = self.pool.get().await?;
        let Some(found) = api_keys::find_principal(&client, hash).await? else {
            return Ok(None);
        };
        let found = Arc::new(found);
        self.cache.insert(*hash, found.clone());
        Ok(Some(found))
    }
}

/// Reads the `Authorization` header value down to the hash of a well-formed key.
pub fn key_hash(header: Option<&str>) -> Result<[u8; 32], ApiError> {
    let header = header.ok_or(ApiError::Unauthorized("missing bearer key"))?;
    let (scheme, key) = header.split_once(' ').ok_or(ApiError::Unauthorized(
        "the Authorization header must be 'Bearer <API_KEY>'",
    ))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(ApiError::Unauthorized(
            "the Authorization header must be 'Bearer <API_KEY>'",
        ));
    }
    let key = key.trim();
    if !keys::is_well_formed(key) {
        return Err(ApiError::Unauthorized("invalid API key"));
    }
    Ok(keys::hash(key))
}

/// The principal of a found key, or why the key may not be used.
pub fn principal_of(found: &KeyPrincipal) -> Result<Principal, ApiError> {
    // A terminated account is refused whatever the state of the key used.
    if found.account_terminated {
        return Err(ApiError::AccountTerminated);
    }
    if found.deleted || !found.enabled {
        return Err(ApiError::Unauthorized("this API key is disabled"));
    }
    if found.expires_at.is_some_and(|at| at <= clock::now()) {
        return Err(ApiError::Unauthorized("this API key has expired"));
    }
    Ok(Principal {
        key_id: found.key_id,
        account_id: found.account_id,
        scopes: found.scopes.clone().into(),
        rate_per_minute: found.rate_per_minute,
        check_quota_daily: found.check_quota_daily,
        nsfw_check: found.nsfw_check,
        registry_member: found.registry_member,
    })
}

/// Checks that `principal` may use an endpoint needing `access`.
pub fn authorize(principal: &Principal, access: Access) -> Result<(), ApiError> {
    let scope = match access {
        Access::Public | Access::AnyKey => return Ok(()),
        Access::Scope(scope) => scope,
        Access::EitherScope(first, second) => {
            if principal.scopes.contains(&first) || principal.scopes.contains(&second) {
                return Ok(());
            }
            return Err(ApiError::Forbidden(format!(
                "this API key lacks the scope {first} (or {second})"
            )));
        }
    };
    if !principal.scopes.contains(&scope) {
        return Err(ApiError::Forbidden(format!(
            "this API key lacks the scope {scope}"
        )));
    }
    if scope.needs_registry_membership() && !principal.registry_member {
        return Err(ApiError::Forbidden(format!(
            "scope {scope} needs an account vetted as a registry member"
        )));
    }
    Ok(())
}
