//! The opaque cursors of the paged listings: a position (`created_at`, id) as URL-safe
//! base64, so a page ends where the previous one left off whatever is inserted meanwhile.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::error::ApiError;

/// The cursor of the position (`at`, `id`).
pub fn encode(at: OffsetDateTime, id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", at.unix_timestamp_nanos(), id))
}

/// The position of a cursor made by [`encode`]; anything else is a 400.
pub fn decode(raw: &str) -> Result<(OffsetDateTime, Uuid), ApiError> {
    let invalid = || ApiError::InvalidRequest("invalid cursor".to_owned());
    let bytes = URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (nanos, id) = text.split_once(':').ok_or_else(invalid)?;
    let nanos: i128 = nanos.parse().map_err(|_| invalid())?;
    let at = OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| invalid())?;
    Ok((at, id.parse().map_err(|_| invalid())?))
}
