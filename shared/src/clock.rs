//! The one place that reads the wall clock, so the rest of the code takes `now` as a value.

use time::OffsetDateTime;

/// The current UTC instant.
#[allow(clippy::disallowed_methods, reason = "this module is the clock")]
pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// Formats an instant as RFC 3339 UTC with millisecond precision (`2026-11-22T10:00:00.123Z`),
/// the one date format on the wire.
pub fn format_millis(at: OffsetDateTime) -> String {
    let at = at.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

/// Serde adapters writing instants in the wire format of [`format_millis`].
pub mod serde_millis {
    use serde::Serializer;
    use time::OffsetDateTime;

    /// Serialises an instant.
    pub fn serialize<S: Serializer>(at: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_millis(*at))
    }

    /// Serialises an optional instant (`null` when absent).
    pub mod option {
        use serde::Serializer;
        use time::OffsetDateTime;

        /// Serialises an optional instant.
        pub fn serialize<S: Serializer>(
            at: &Option<OffsetDateTime>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => s.serialize_str(&super::super::format_millis(*at)),
                None => s.serialize_none(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn format_millis_pads_and_truncates_to_milliseconds() {
        let at = datetime!(2026-01-02 03:04:05.123_456 UTC);
        assert_eq!(format_millis(at), "2026-01-02T03:04:05.123Z");
    }

    #[test]
    fn format_millis_converts_offsets_to_utc() {
        let at = datetime!(2026-01-02 03:04:05 +02:00);
        assert_eq!(format_millis(at), "2026-01-02T01:04:05.000Z");
    }
}
