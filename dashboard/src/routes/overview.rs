//! The overview: the account at a glance.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::domain::AccountId;

use crate::{
    error::DashboardError,
    session::Session,
    {nav::Nav, pages::render},
};

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(overview));
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    nav: Option<Nav>,
    account: AccountId,
}

async fn overview(session: Session) -> Result<HttpResponse, DashboardError> {
    render(&OverviewPage {
        nav: Some(session.nav("overview")),
        account: session.account(),
    })
}
