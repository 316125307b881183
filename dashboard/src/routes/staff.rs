//! Staff pages (`admin:config`): accounts and their termination. Every handler refuses a
//! session without the scope before reading anything.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::accounts::{self, Account},
    domain::{AccountId, Scope},
};

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other, Stamp},
    session::Session,
    state::AppState,
};

/// Accounts shown on the list.
const LIST_LIMIT: i64 = 500;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/staff/accounts", web::get().to(list))
        .route("/staff/accounts/{id}/terminate", web::post().to(terminate));
}

struct AccountRow {
    account: Account,
    created: Stamp,
}

#[derive(Template)]
#[template(path = "staff_accounts.html")]
struct AccountsPage {
    nav: Option<Nav>,
    csrf: String,
    rows: Vec<AccountRow>,
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::AdminConfig)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let rows = accounts::list(&client, 0, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|account| AccountRow {
            created: Stamp(account.created_at),
            account,
        })
        .collect();
    render(&AccountsPage {
        nav: Some(session.nav("staff")),
        csrf: session.csrf.clone(),
        rows,
    })
}

async fn terminate(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::AdminConfig)?;
    let id: AccountId = path.parse().map_err(|_| DashboardError::NotFound)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    accounts::terminate(&client, id)
        .await?
        .ok_or(DashboardError::NotFound)?;
    tracing::warn!(account = %id, by = %posted.session.user.id, "Account terminated from the dashboard");
    Ok(see_other("/staff/accounts"))
}
