//! The pages. Each module registers its own routes; GETs render, POSTs take a [`Posted`]
//! form (CSRF-checked) and answer with a redirect, so a reload never posts again.
//!
//! [`Posted`]: crate::form::Posted

use actix_web::{http::header, web, HttpResponse};

use moderation_shared::telemetry;

use crate::{error::DashboardError, state::AppState};

pub mod audit;
pub mod deliveries;
pub mod export;
pub mod jobs;
pub mod keys;
pub mod overview;
pub mod policy;
pub mod policy_switches;
pub mod policy_versions;
pub mod registry;
pub mod sign_in;
pub mod staff;
pub mod submit;
pub mod webhooks;

/// The embedded stylesheet.
const STYLESHEET: &str = include_str!("../../static/dashboard.css");
/// The embedded script showing timestamps in the viewer's time zone (pages work without it).
const LOCAL_TIME_SCRIPT: &str = include_str!("../../static/local-time.js");

/// Registers every route.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/static/dashboard.css", web::get().to(stylesheet))
        .route("/static/local-time.js", web::get().to(local_time_script))
        .route("/metrics", web::get().to(metrics))
        .configure(sign_in::configure)
        .configure(overview::configure)
        .configure(keys::configure)
        .configure(jobs::configure)
        .configure(submit::configure)
        .configure(webhooks::configure)
        .configure(deliveries::configure)
        .configure(policy::configure)
        .configure(policy_versions::configure)
        .configure(policy_switches::configure)
        .configure(audit::configure)
        .configure(export::configure)
        .configure(registry::configure)
        .configure(staff::configure)
        .default_service(web::to(not_found));
}

async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(STYLESHEET)
}

async fn local_time_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(LOCAL_TIME_SCRIPT)
}

/// Prometheus text, like every process of the fleet.
async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    telemetry::record_pool_use(&state.pool);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}

async fn not_found() -> Result<HttpResponse, DashboardError> {
    Err(DashboardError::NotFound)
}
