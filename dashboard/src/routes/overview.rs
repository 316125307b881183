//! The overview: the account's usage per modality over a period, drawn as SVG on the server.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    usage::{self, Period, Point},
};
use serde::Deserialize;
use time::macros::format_description;

use crate::{
    chart::{self, Chart, SERIES},
    error::DashboardError,
    nav::Nav,
    pages::render,
    session::Session,
    state::AppState,
};

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(overview));
}

/// The period, kept in the URL.
#[derive(Debug, Deserialize)]
struct OverviewQuery {
    period: Option<String>,
}

/// A link to another period.
struct PeriodLink {
    name: &'static str,
    current: bool,
}

/// A legend entry with its total.
struct Legend {
    class: &'static str,
    name: &'static str,
    total: i64,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    nav: Option<Nav>,
    periods: Vec<PeriodLink>,
    chart: Chart,
    legend: Vec<Legend>,
    width: f64,
    height: f64,
    any: bool,
    period: &'static str,
}

async fn overview(
    state: web::Data<AppState>,
    session: Session,
    query: web::Query<OverviewQuery>,
) -> Result<HttpResponse, DashboardError> {
    let period = Period::parse(query.period.as_deref())
        .map_err(|e| DashboardError::BadRequest(format!("{e}.")))?;
    let points = {
        let client = state.pool.get().await.map_err(anyhow::Error::from)?;
        usage::series(&client, session.account(), period, clock::now()).await?
    };
    let (unit, _) = period.bucket();
    let chart = chart::draw(&points, |p: &Point| bucket_label(unit, p));
    let legend = SERIES
        .iter()
        .zip(chart.totals)
        .map(|(&(class, name), total)| Legend { class, name, total })
        .collect();
    render(&OverviewPage {
        nav: Some(session.nav("overview")),
        periods: [Period::Hour, Period::Day, Period::Week, Period::Month]
            .into_iter()
            .map(|p| PeriodLink {
                name: p.as_str(),
                current: p == period,
            })
            .collect(),
        any: chart.totals.iter().any(|&t| t > 0),
        chart,
        legend,
        width: chart::WIDTH,
        height: chart::HEIGHT,
        period: period.as_str(),
    })
}

/// A bucket's name: its minute, hour or day (UTC).
fn bucket_label(unit: &str, point: &Point) -> String {
    let formatted = match unit {
        "minute" => point.ts.format(format_description!("[hour]:[minute]")),
        "hour" => point.ts.format(format_description!("[day] [hour]:00")),
        _ => point.ts.format(format_description!("[month]-[day]")),
    };
    formatted.unwrap_or_default()
}
