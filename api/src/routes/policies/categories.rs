//! `GET|POST /api/v1/custom-categories` and `PATCH|DELETE /api/v1/custom-categories/{id}`.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::{
        custom_categories::{
            self, CategoryChange, CustomCategoryRow, Inserted, NewCategory, MAX_PER_ACCOUNT,
        },
        DbError,
    },
    domain::CustomCategoryId,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{clean_terms, present};
use crate::{auth::Principal, error::ApiError, state::AppState};

/// The longest name, in characters (`a-z`, `0-9`, `_`).
const MAX_NAME_CHARS: usize = 64;
/// The longest description, in characters.
const MAX_DESCRIPTION_CHARS: usize = 2000;
/// The most keywords of one category.
const MAX_KEYWORDS: usize = 100;

/// A category as the api shows it.
#[derive(Debug, Serialize)]
struct CategoryView {
    id: CustomCategoryId,
    name: String,
    description: String,
    keywords: Vec<String>,
    enabled: bool,
    created_at: String,
}

impl From<CustomCategoryRow> for CategoryView {
    fn from(row: CustomCategoryRow) -> Self {
        Self {
            id: row.id,
            name: row.name,
            description: row.description,
            keywords: row.keywords,
            enabled: row.enabled,
            created_at: format_millis(row.created_at),
        }
    }
}

/// The create body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    name: String,
    description: String,
    #[serde(default, deserialize_with = "present")]
    keywords: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    enabled: Option<bool>,
}

/// The change body: any of the three, at least one.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChangeBody {
    #[serde(default, deserialize_with = "present")]
    description: Option<String>,
    #[serde(default, deserialize_with = "present")]
    keywords: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    enabled: Option<bool>,
}

/// `{"categories": [...]}`, ordered by name.
pub(super) async fn list(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let rows = custom_categories::list(&client, principal.account_id).await?;
    let categories: Vec<CategoryView> = rows.into_iter().map(CategoryView::from).collect();
    Ok(HttpResponse::Ok().json(json!({ "categories": categories })))
}

/// Creates a category: 201 with it, 409 for a taken name or a full account.
pub(super) async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<CreateBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    check_name(&body.name)?;
    check_description(&body.description)?;
    let keywords = clean_keywords(body.keywords.unwrap_or_default())?;
    let new = NewCategory {
        name: &body.name,
        description: &body.description,
        keywords: &keywords,
        enabled: body.enabled.unwrap_or(true),
    };
    let mut client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    match custom_categories::insert(&tx, principal.account_id, &new).await? {
        Inserted::Created(row) => {
            tx.commit().await.map_err(DbError::from)?;
            Ok(HttpResponse::Created().json(CategoryView::from(row)))
        }
        Inserted::DuplicateName => Err(ApiError::Conflict(format!(
            "a custom category named {:?} already exists",
            body.name
        ))),
        Inserted::LimitReached => Err(ApiError::Conflict(format!(
            "an account may have at most {MAX_PER_ACCOUNT} custom categories; delete one \
             before creating another"
        ))),
    }
}

/// Changes a category's description, keywords or switch: 200 with it.
pub(super) async fn change(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<String>,
    body: web::Json<ChangeBody>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    let body = body.into_inner();
    if body.description.is_none() && body.keywords.is_none() && body.enabled.is_none() {
        return Err(ApiError::InvalidRequest(
            "give at least one of description, keywords and enabled".to_owned(),
        ));
    }
    if let Some(description) = &body.description {
        check_description(description)?;
    }
    let keywords = body.keywords.map(clean_keywords).transpose()?;
    let change = CategoryChange {
        description: body.description.as_deref(),
        keywords: keywords.as_deref(),
        enabled: body.enabled,
    };
    let mut client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    let row = custom_categories::update(&tx, principal.account_id, id, &change)
        .await?
        .ok_or_else(not_found)?;
    tx.commit().await.map_err(DbError::from)?;
    Ok(HttpResponse::Ok().json(CategoryView::from(row)))
}

/// Deletes a category: 204.
pub(super) async fn delete(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    let mut client = state.pool.get().await.map_err(ApiError::unavailable)?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    if !custom_categories::delete(&tx, principal.account_id, id).await? {
        return Err(not_found());
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(HttpResponse::NoContent().finish())
}

/// A slug: 1 to 64 of `a-z`, `0-9` and `_`.
fn check_name(name: &str) -> Result<(), ApiError> {
    let valid = (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(ApiError::InvalidRequest(format!(
            "name must be 1 to {MAX_NAME_CHARS} characters of a-z, 0-9 and _"
        )))
    }
}

/// 1 to 2000 characters, not only whitespace; line breaks and tabs are allowed, other control
/// characters are not.
fn check_description(description: &str) -> Result<(), ApiError> {
    let chars = description.chars().count();
    if chars == 0 || chars > MAX_DESCRIPTION_CHARS || description.trim().is_empty() {
        return Err(ApiError::InvalidRequest(format!(
            "description must be 1 to {MAX_DESCRIPTION_CHARS} characters and not only \
             whitespace, got {chars}"
        )));
    }
    if description
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(ApiError::InvalidRequest(
            "description must not contain control characters other than line breaks and tabs"
                .to_owned(),
        ));
    }
    Ok(())
}

fn clean_keywords(keywords: Vec<String>) -> Result<Vec<String>, ApiError> {
    clean_terms("keywords", keywords, 0, MAX_KEYWORDS)
}

fn parse_id(id: &str) -> Result<CustomCategoryId, ApiError> {
    id.parse()
        .map_err(|_| ApiError::InvalidRequest("the category id must be a UUID".to_owned()))
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such custom category".to_owned())
}
