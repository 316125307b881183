//! The account's own categories and lists (`/policy`, "Categories" in the bar): custom
//! categories and blocklist terms (`settings:manage`). The thresholds of the model scores are
//! the policy versions' (`policy_versions`).
//! Every change bumps the account's policy version in its transaction, as the api's do, so
//! workers recompile their matchers.

use actix_web::{http::StatusCode, web, HttpResponse};
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
    pages::{render_with, see_other},
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
            "/policy/categories/{id}/edit",
            web::post().to(edit_category),
        )
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
        DashboardError::BadRequest(sentence(&err))
    }
}

/// A category form refused: shown again with its values and what is wrong.
#[derive(Debug, Default)]
struct Refused {
    /// The id of the category edited; `None` for the form adding one.
    category: Option<CustomCategoryId>,
    message: String,
    name: String,
    description: String,
    keywords: String,
}

/// A category as the page lists it, with its edit form's values.
struct CategoryRow {
    category: CustomCategoryRow,
    /// The edit form's description and keywords: the stored ones, or the refused ones.
    description: String,
    keywords: String,
    /// What was wrong with its edit, which is then open.
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "policy.html")]
struct PolicyPage {
    nav: Option<Nav>,
    csrf: String,
    categories: Vec<CategoryRow>,
    terms: Vec<String>,
    /// The add form refused, if it was.
    create: Option<Refused>,
}

async fn show(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::SettingsManage)?;
    page(&state, &session, None).await
}

/// The page, with a refused form shown again (answered 400).
async fn page(
    state: &AppState,
    session: &Session,
    refused: Option<Refused>,
) -> Result<HttpResponse, DashboardError> {
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let categories = custom_categories::list(&client, session.account()).await?;
    let terms = blocklist::terms(&client, session.account()).await?;
    let refused_any = refused.is_some();
    let (create, mut edit) = match refused {
        Some(r) if r.category.is_some() => (None, Some(r)),
        other => (other, None),
    };
    let categories = categories
        .into_iter()
        .map(
            |category| match edit.take_if(|r| r.category == Some(category.id)) {
                Some(r) => CategoryRow {
                    category,
                    description: r.description,
                    keywords: r.keywords,
                    error: Some(r.message),
                },
                None => CategoryRow {
                    description: category.description.clone(),
                    keywords: category.keywords.join("\n"),
                    error: None,
                    category,
                },
            },
        )
        .collect();
    let status = if refused_any {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    render_with(
        &PolicyPage {
            nav: Some(session.nav("categories")),
            csrf: session.csrf.clone(),
            categories,
            terms,
            create,
        },
        status,
    )
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
    let refuse = |message: String| Refused {
        category: None,
        message,
        name: name.to_owned(),
        description: description.to_owned(),
        keywords: fields.get("keywords").unwrap_or_default().to_owned(),
    };
    let checked = policy_input::check_name(name)
        .and_then(|()| policy_input::check_description(description))
        .and_then(|()| policy_input::clean_keywords(split_list(fields.get("keywords"))));
    let keywords = match checked {
        Ok(keywords) => keywords,
        Err(err) => return page(&state, &session, Some(refuse(sentence(&err)))).await,
    };
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let new = NewCategory {
        name,
        description,
        keywords: &keywords,
        enabled: true,
    };
    let message =
        match custom_categories::insert(&tx, session.account(), session.actor(), &new).await? {
            Inserted::Created(_) => {
                tx.commit().await.map_err(anyhow::Error::from)?;
                return Ok(see_other("/policy"));
            }
            Inserted::DuplicateName => format!("A category named {name:?} exists already."),
            Inserted::LimitReached => format!(
                "An account may have at most {} custom categories.",
                custom_categories::MAX_PER_ACCOUNT
            ),
        };
    drop(tx);
    drop(client);
    page(&state, &session, Some(refuse(message))).await
}

/// A rule broken, as a sentence.
fn sentence(err: &InvalidPolicy) -> String {
    let mut text = err.0.clone();
    if let Some(first) = text.get(..1) {
        text.replace_range(..1, &first.to_uppercase());
    }
    format!("{text}.")
}

/// Changes a category's description and keywords, checked as the api's PATCH checks them; a
/// refused edit is shown again in its form.
async fn edit_category(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::SettingsManage)?;
    let id = category_id(&path)?;
    let description = fields.get("description").unwrap_or_default();
    let checked = policy_input::check_description(description)
        .and_then(|()| policy_input::clean_keywords(split_list(fields.get("keywords"))));
    let keywords = match checked {
        Ok(keywords) => keywords,
        Err(err) => {
            let refused = Refused {
                category: Some(id),
                message: sentence(&err),
                name: String::new(),
                description: description.to_owned(),
                keywords: fields.get("keywords").unwrap_or_default().to_owned(),
            };
            return page(&state, &session, Some(refused)).await;
        }
    };
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let change = CategoryChange {
        description: Some(description),
        keywords: Some(&keywords),
        enabled: None,
    };
    custom_categories::update(&tx, session.account(), session.actor(), id, &change)
        .await?
        .ok_or(DashboardError::NotFound)?;
    tx.commit().await.map_err(anyhow::Error::from)?;
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
    custom_categories::update(
        &tx,
        posted.session.account(),
        posted.session.actor(),
        id,
        &change,
    )
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
    if !custom_categories::delete(&tx, posted.session.account(), posted.session.actor(), id).await?
    {
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
    match blocklist::add(
        &tx,
        posted.session.account(),
        posted.session.actor(),
        &terms,
    )
    .await?
    {
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
    blocklist::remove(
        &tx,
        posted.session.account(),
        posted.session.actor(),
        &[term.to_owned()],
    )
    .await?;
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other("/policy"))
}
