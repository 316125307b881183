//! The Shared Registry endpoints: reporting entries, reading and revoking one's own, and
//! checking identifiers against other members' entries.
//!
//! Request bodies are strict: unknown properties anywhere are 400. Error messages name the
//! rule broken, never a submitted hash.

use actix_web::{error::JsonPayloadError, web, HttpRequest};
use moderation_shared::registry::{ClientHash, IdentifierType};
use serde::Deserialize;
use utoipa::ToSchema;

use super::resource;
use crate::error::{self, ApiError};

pub(crate) mod check;
pub(crate) mod entries;

/// The largest registry request body.
const JSON_LIMIT: usize = 16 * 1024;

/// Registers the registry routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/registry/check")
            .app_data(json_config())
            .route(web::post().to(check::check)),
    )
    .service(
        resource("/registry/entries")
            .app_data(json_config())
            .route(web::post().to(entries::report))
            .route(web::get().to(entries::list)),
    )
    .service(resource("/registry/entries/{id}").route(web::get().to(entries::get)))
    .service(
        resource("/registry/entries/{id}/revoke")
            .app_data(json_config())
            .route(web::post().to(entries::revoke)),
    );
}

fn json_config() -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(JSON_LIMIT)
        .error_handler(json_error)
}

/// Like the api's JSON error handler, but a deserialisation message has every long run of hex
/// digits masked: serde may quote a value or a property name, and that could be a hash.
fn json_error(err: JsonPayloadError, req: &HttpRequest) -> actix_web::Error {
    match err {
        JsonPayloadError::Deserialize(e) => ApiError::InvalidRequest(format!(
            "invalid request body: {}",
            mask_hex_runs(&e.to_string())
        ))
        .into(),
        other => error::json_error(other, req),
    }
}

/// Replaces every run of 32 or more hex digits with `[redacted]`.
fn mask_hex_runs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() >= 32 {
            out.push_str("[redacted]");
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in text.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// `{"type": "email", "sha256": "<64 lowercase hex>"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IdentifierBody {
    /// Only `email`.
    #[serde(rename = "type")]
    kind: IdentifierType,
    /// SHA-256 (lowercase hex) of the identifier normalised per version 1; the hash of the
    /// empty string is refused.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    sha256: String,
}

impl IdentifierBody {
    /// The parsed hash; `field` names the property in the message.
    fn hash(&self, field: &str) -> Result<ClientHash, ApiError> {
        let IdentifierType::Email = self.kind;
        ClientHash::parse(&self.sha256)
            .map_err(|e| ApiError::InvalidRequest(format!("{field}.sha256 {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::mask_hex_runs;

    #[test]
    fn long_hex_runs_are_masked_and_short_ones_kept() {
        let hash = "ab".repeat(32);
        assert_eq!(
            mask_hex_runs(&format!("unknown field `{hash}`, expected `x`")),
            "unknown field `[redacted]`, expected `x`"
        );
        assert_eq!(
            mask_hex_runs("line 1 column 20 cafe"),
            "line 1 column 20 cafe"
        );
    }
}
