//! Instants on the command line (a leaf: it imports nothing of the crate).

use time::OffsetDateTime;

/// Parses an RFC 3339 date-time argument.
pub fn parse_rfc3339(s: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("expected an RFC 3339 date-time: {e}"))
}
