//! The paged listings' shared parts: the page size (`limit`) and the opaque cursor, a position
//! (`created_at`, id) as URL-safe base64, so a page ends where the previous one left off
//! whatever is inserted meanwhile.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::error::ApiError;

/// The default and the largest page.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;

/// The page size asked for: 1 to 1000, 100 when not given; anything else is a 400.
pub fn limit(asked: Option<i64>) -> Result<i64, ApiError> {
    let limit = asked.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::InvalidRequest(format!(
            "limit must be 1 to {MAX_LIMIT}"
        )));
    }
    Ok(limit)
}

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
