//! The Shared Registry for members (`registry:submit`): the account's own entries, and
//! revoking one. Reporting and checking need the member's hashed identifiers and are the
//! api's for now.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    db::registry_entries::{self, RegistryEntry},
    domain::{RegistryEntryId, Scope},
    registry::{validate_text, EntryStatus},
};

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other, status_word, Stamp},
    session::Session,
    state::AppState,
};

/// Entries shown.
const LIST_LIMIT: i64 = 500;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/registry", web::get().to(list))
        .route("/registry/{id}/revoke", web::post().to(revoke));
}

struct EntryRow {
    entry: RegistryEntry,
    status: &'static str,
    revocable: bool,
    created: Stamp,
}

#[derive(Template)]
#[template(path = "registry.html")]
struct RegistryPage {
    nav: Option<Nav>,
    csrf: String,
    rows: Vec<EntryRow>,
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::RegistrySubmit)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let now = clock::now();
    let rows = registry_entries::list_own(&client, session.account(), None, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|entry| {
            let status = entry.status(now);
            EntryRow {
                status: status_word(status),
                revocable: status == EntryStatus::Active,
                created: Stamp(entry.created_at),
                entry,
            }
        })
        .collect();
    render(&RegistryPage {
        nav: Some(session.nav("registry")),
        csrf: session.csrf.clone(),
        rows,
    })
}

async fn revoke(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::RegistrySubmit)?;
    let id: RegistryEntryId = path.parse().map_err(|_| DashboardError::NotFound)?;
    let reason = posted.fields.get("reason").unwrap_or_default();
    validate_text("reason", reason).map_err(|e| DashboardError::BadRequest(format!("{e}.")))?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    registry_entries::revoke_own(&client, posted.session.account(), id, reason, clock::now())
        .await?
        .ok_or(DashboardError::NotFound)?;
    Ok(see_other("/registry"))
}
