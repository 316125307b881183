//! The account's own policy: custom categories and blocklist terms (`settings:manage`).
//! Every change bumps the account's policy version in its transaction, as the api's do, so
//! workers recompile their matchers.

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::{
        blocklist::{self, Added},
        custom_categories::{self, CategoryChange, CustomCategoryRow, Inserted, NewCategory},
    },
    domain::{CustomCategoryId, Scope},
    policy_input::{self, InvalidPolicy},
};

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other},
    session::Session,
    state::AppState,
};

/// Terms one form may add or remove.
const MAX_TERMS_PER_FORM: usize = 100;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/policy", web::get().to(show))
        .route("/policy/categories", web::post().to(create_category))
        .route(
            "/policy/categories/{id}/toggle",
            web::post().to(toggle_category),
        )
        .route(
            "/policy/categories/{id}/delete",
            web::post().to(delete_category),
        )
        .route("/policy/blocklist", web::post().to(add_terms))
        .route("/policy/blocklist/remove", web::post().to(remove_term));
}

impl From<InvalidPolicy> for DashboardError {
    fn from(err: InvalidPolicy) -> Self {
        DashboardError::BadRequest(format!("{}.", err.0))
    }
}

#[derive(Template)]
#[template(path = "policy.html")]
struct PolicyPage {
    nav: Option<Nav>,
    csrf: String,
    categories: Vec<CustomCategoryRow>,
    terms: Vec<String>,
}

async fn show(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::SettingsManage)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let categories = custom_categories::list(&client, session.account()).await?;
    let terms = blocklist::terms(&client, session.account()).await?;
    render(&PolicyPage {
        nav: Some(session.nav("policy")),
        csrf: session.csrf.clone(),
        categories,
        terms,
    })
}

/// Keywords or terms typed one a line or separated by commas.
fn split_list(raw: Option<&str>) -> Vec<String> {
    raw.unwrap_or_default()
        .split(['\n', ','])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

async fn create_category(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::SettingsManage)?;
    let name = fields.get("name").unwrap_or_default();
    let description = fields.get("description").unwrap_or_default();
    policy_input::check_name(name)?;
    policy_input::check_description(description)?;
    let keywords = policy_input::clean_keywords(split_list(fields.get("keywords")))?;
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let new = NewCategory {
        name,
        description,
        keywords: &keywords,
        enabled: true,
    };
    match custom_categories::insert(&tx, session.account(), &new).await? {
        Inserted::Created(_) => tx.commit().await.map_err(anyhow::Error::from)?,
        Inserted::DuplicateName => {
            return Err(DashboardError::BadRequest(format!(
                "A category named {name:?} exists already."
            )))
        }
        Inserted::LimitReached => {
            return Err(DashboardError::BadRequest(format!(
                "An account may have at most {} custom categories.",
                custom_categories::MAX_PER_ACCOUNT
            )))
        }
    }
    Ok(see_other("/policy"))
}

fn category_id(raw: &str) -> Result<CustomCategoryId, DashboardError> {
    raw.parse().map_err(|_| DashboardError::NotFound)
}

async fn toggle_category(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::SettingsManage)?;
    let id = category_id(&path)?;
    let enabled = posted.fields.get("enabled") == Some("true");
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let change = CategoryChange {
        enabled: Some(enabled),
        ..CategoryChange::default()
    };
    custom_categories::update(&tx, posted.session.account(), id, &change)
        .await?
        .ok_or(DashboardError::NotFound)?;
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other("/policy"))
}

async fn delete_category(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::SettingsManage)?;
    let id = category_id(&path)?;
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    if !custom_categories::delete(&tx, posted.session.account(), id).await? {
        return Err(DashboardError::NotFound);
    }
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other("/policy"))
}

async fn add_terms(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::SettingsManage)?;
    let terms = policy_input::clean_terms(
        "terms",
        split_list(posted.fields.get("terms")),
        1,
        MAX_TERMS_PER_FORM,
    )?;
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    match blocklist::add(&tx, posted.session.account(), &terms).await? {
        Added::Stored(_) => tx.commit().await.map_err(anyhow::Error::from)?,
        Added::LimitExceeded { .. } => {
            return Err(DashboardError::BadRequest(format!(
                "An account's blocklist holds at most {} terms.",
                blocklist::MAX_PER_ACCOUNT
            )))
        }
    }
    Ok(see_other("/policy"))
}

async fn remove_term(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::SettingsManage)?;
    let term = posted
        .fields
        .get("term")
        .ok_or_else(|| DashboardError::BadRequest("Name the term to remove.".to_owned()))?;
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    blocklist::remove(&tx, posted.session.account(), &[term.to_owned()]).await?;
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other("/policy"))
}
