//! What every page shares: timestamps, words, and rendering.

use std::fmt;

use actix_web::HttpResponse;
use askama::Template;
use moderation_shared::registry::EntryStatus;
use time::{format_description::well_known::Rfc3339, macros::format_description, OffsetDateTime};

use crate::error::DashboardError;

/// An instant: `<time datetime=... title="... UTC">` showing the UTC time, which the
/// embedded script (`static/local-time.js`) rewrites to the viewer's time zone; the title
/// keeps the UTC time on hover, and without the script the page shows UTC. Its markup is made
/// here from a timestamp alone, so templates print it unescaped.
#[derive(Debug, Clone, Copy)]
pub struct Stamp(pub OffsetDateTime);

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let utc = self.0.to_offset(time::UtcOffset::UTC);
        let iso = utc.format(&Rfc3339).map_err(|_| fmt::Error)?;
        let shown = utc
            .format(format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second]"
            ))
            .map_err(|_| fmt::Error)?;
        write!(
            f,
            r#"<time datetime="{iso}" title="{shown} UTC">{shown} UTC</time>"#
        )
    }
}

/// An optional instant: the stamp, or a dash.
pub fn stamp_or_dash(at: Option<OffsetDateTime>) -> String {
    at.map_or_else(|| "—".to_owned(), |at| Stamp(at).to_string())
}

/// How long something has waited, in words: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`.
pub fn age(waited: time::Duration) -> String {
    let secs = waited.whole_seconds().max(0);
    let (days, hours, minutes) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60);
    match secs {
        0..=59 => format!("{secs} s"),
        60..=3599 => format!("{minutes} min"),
        3600..=86_399 => format!("{hours} h {minutes} min"),
        _ => format!("{days} d {hours} h"),
    }
}

/// An entry's status as a word.
pub fn status_word(status: EntryStatus) -> &'static str {
    match status {
        EntryStatus::Active => "active",
        EntryStatus::Disputed => "disputed",
        EntryStatus::Revoked => "revoked",
        EntryStatus::Expired => "expired",
    }
}

/// Renders `page` as a 200 HTML answer.
pub fn render(page: &impl Template) -> Result<HttpResponse, DashboardError> {
    let body = page.render().map_err(anyhow::Error::from)?;
    Ok(HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(body))
}

/// Renders `page` answered with `status`: a page showing a refused form.
pub fn render_with(
    page: &impl Template,
    status: actix_web::http::StatusCode,
) -> Result<HttpResponse, DashboardError> {
    let mut res = render(page)?;
    *res.status_mut() = status;
    Ok(res)
}

/// A redirect after a successful POST (303, so a reload does not post again).
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((actix_web::http::header::LOCATION, location))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_age_reads_in_its_largest_units() {
        let age_of = |secs: i64| age(time::Duration::seconds(secs));

        assert_eq!(age_of(-3), "0 s");
        assert_eq!(age_of(45), "45 s");
        assert_eq!(age_of(12 * 60 + 59), "12 min");
        assert_eq!(age_of(3 * 3600 + 5 * 60), "3 h 5 min");
        assert_eq!(age_of(2 * 86_400 + 4 * 3600 + 59), "2 d 4 h");
    }

    #[test]
    fn a_stamp_is_utc_in_a_time_element() {
        let at = time::macros::datetime!(2026-11-23 23:05:09 +01:00);
        assert_eq!(
            Stamp(at).to_string(),
            r#"<time datetime="2026-11-23T22:05:09Z" title="2026-11-23 22:05:09 UTC">2026-11-23 22:05:09 UTC</time>"#
        );
    }
}
