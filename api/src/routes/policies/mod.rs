//! An account's own policy: custom categories (`/custom-categories`) and blocklist terms
//! (`/blocklist`), both under scope `settings:manage`.
//!
//! Request bodies are strict: unknown properties are 400, and so is `null` for an optional
//! property (leave it out instead). Every change bumps the account's policy version in the same
//! transaction, so workers recompile their cached matchers.

use actix_web::web;
use serde::{Deserialize, Deserializer};

use super::resource;
use crate::error::ApiError;

pub(crate) mod blocklist;
pub(crate) mod categories;

use moderation_shared::policy_input::InvalidPolicy;
pub use moderation_shared::policy_input::MAX_TERM_CHARS;

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/custom-categories")
            .route(web::get().to(categories::list))
            .route(web::post().to(categories::create)),
    )
    .service(
        resource("/custom-categories/{id}")
            .route(web::patch().to(categories::change))
            .route(web::delete().to(categories::delete)),
    )
    .service(
        resource("/blocklist")
            .route(web::get().to(blocklist::list))
            .route(web::post().to(blocklist::add))
            .route(web::delete().to(blocklist::remove)),
    );
}

/// For `#[serde(default, deserialize_with = "present")]`: an absent property is `None`, and a
/// `null` is refused like any other value of the wrong type.
pub(crate) fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

impl From<InvalidPolicy> for ApiError {
    fn from(err: InvalidPolicy) -> Self {
        ApiError::InvalidRequest(err.0)
    }
}
