//! Staff pages (`admin:config`): accounts and their termination, and decisions on Shared
//! Registry disputes. Every handler refuses a session without the scope before reading
//! anything.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    db::{
        accounts::{self, Account},
        registry_entries::{self, DisputeOutcome, RegistryEntry},
    },
    domain::{AccountId, RegistryEntryId, Scope},
    registry::DisputeAction,
};

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other, status_word, Stamp},
    session::Session,
    state::AppState,
};

/// Accounts shown on the list.
const LIST_LIMIT: i64 = 500;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/staff/accounts", web::get().to(list))
        .route("/staff/accounts/{id}/terminate", web::post().to(terminate))
        .route("/staff/registry", web::get().to(registry))
        .route("/staff/registry/{id}/{action}", web::post().to(decide));
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
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    accounts::terminate(&tx, posted.session.actor(), id)
        .await?
        .ok_or(DashboardError::NotFound)?;
    tx.commit().await?;
    tracing::warn!(account = %id, by = %posted.session.user.id, "Account terminated from the dashboard");
    Ok(see_other("/staff/accounts"))
}

/// Registry entries shown to staff.
const ENTRY_LIMIT: i64 = 200;

struct EntryRow {
    entry: RegistryEntry,
    status: &'static str,
    open_dispute: bool,
    can_open: bool,
    updated: Stamp,
}

#[derive(Template)]
#[template(path = "staff_registry.html")]
struct RegistryPage {
    nav: Option<Nav>,
    csrf: String,
    rows: Vec<EntryRow>,
}

async fn registry(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::AdminConfig)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let now = clock::now();
    let rows = registry_entries::list_recent(&client, ENTRY_LIMIT)
        .await?
        .into_iter()
        .map(|entry| {
            let status = entry.status(now);
            EntryRow {
                status: status_word(status),
                open_dispute: entry.has_open_dispute(),
                can_open: DisputeAction::Open.applies_to(status, entry.has_open_dispute()),
                updated: Stamp(entry.updated_at),
                entry,
            }
        })
        .collect();
    render(&RegistryPage {
        nav: Some(session.nav("staff")),
        csrf: session.csrf.clone(),
        rows,
    })
}

async fn decide(
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::AdminConfig)?;
    let (id, action) = path.into_inner();
    let id: RegistryEntryId = id.parse().map_err(|_| DashboardError::NotFound)?;
    let action = match action.as_str() {
        "open" => DisputeAction::Open,
        "uphold" => DisputeAction::Uphold,
        "reject" => DisputeAction::Reject,
        _ => return Err(DashboardError::NotFound),
    };
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    match registry_entries::dispute(&tx, id, action, clock::now()).await? {
        DisputeOutcome::Done(_) => tx.commit().await.map_err(anyhow::Error::from)?,
        DisputeOutcome::NotFound => return Err(DashboardError::NotFound),
        DisputeOutcome::Refused { .. } => {
            return Err(DashboardError::BadRequest(format!(
                "Not done: {}.",
                action.requirement()
            )))
        }
    }
    tracing::warn!(entry = %id, ?action, by = %posted.session.user.id, "Registry dispute decided from the dashboard");
    Ok(see_other("/staff/registry"))
}
