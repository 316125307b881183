//! The cursor of a paged list: a position (`created_at`, id) as URL-safe base64, the api's
//! format, so a page link ends where the previous page left off whatever is inserted
//! meanwhile, and every page is read from an index (no `OFFSET`).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use time::OffsetDateTime;
use uuid::Uuid;

/// The cursor of the position (`at`, `id`).
pub fn encode(at: OffsetDateTime, id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}:{}", at.unix_timestamp_nanos(), id))
}

/// The position of a cursor made by [`encode`]; `None` for anything else.
pub fn decode(raw: &str) -> Option<(OffsetDateTime, Uuid)> {
    let bytes = URL_SAFE_NO_PAD.decode(raw.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (nanos, id) = text.split_once(':')?;
    let at = OffsetDateTime::from_unix_timestamp_nanos(nanos.parse().ok()?).ok()?;
    Some((at, id.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_garbage_is_refused() {
        let at = time::macros::datetime!(2026-11-23 22:05:09.123456789 UTC);
        let id = Uuid::new_v4();
        assert_eq!(decode(&encode(at, id)), Some((at, id)));
        assert_eq!(decode("not a cursor"), None);
        assert_eq!(decode(&URL_SAFE_NO_PAD.encode("12:nope")), None);
    }
}
