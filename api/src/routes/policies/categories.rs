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
    policy_input::{check_description, check_name, clean_keywords},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::present;
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// A custom category.
#[derive(Debug, Serialize, ToSchema)]
pub struct CategoryView {
    /// Its id.
    #[schema(value_type = Uuid)]
    id: CustomCategoryId,
    /// A slug of `a-z`, `0-9` and `_`, unique per account; results appear under
    /// `categories.custom.<name>`.
    name: String,
    /// The policy text given to the model.
    description: String,
    /// Terms the local classifier matches on word boundaries.
    keywords: Vec<String>,
    /// Whether it runs.
    enabled: bool,
    /// When it was made (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    created_at: String,
}

/// The account's custom categories.
#[derive(Debug, Serialize, ToSchema)]
pub struct CategoryList {
    /// Ordered by name.
    categories: Vec<CategoryView>,
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
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    /// 1 to 64 of `a-z`, `0-9` and `_`.
    #[schema(pattern = "^[a-z0-9_]{1,64}$")]
    name: String,
    /// 1 to 2000 characters, not only whitespace; no control characters but line breaks and
    /// tabs.
    #[schema(min_length = 1, max_length = 2000)]
    description: String,
    /// Up to 100 terms of 1 to 100 characters; default none.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, max_items = 100)]
    keywords: Option<Vec<String>>,
    /// Default true.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    enabled: Option<bool>,
}

/// The change body: any of the three, at least one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangeBody {
    /// 1 to 2000 characters.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, min_length = 1, max_length = 2000)]
    description: Option<String>,
    /// Replaces the keywords: up to 100 terms of 1 to 100 characters.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, max_items = 100)]
    keywords: Option<Vec<String>>,
    /// Switches it on or off.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    enabled: Option<bool>,
}

/// `{"categories": [...]}`, ordered by name.
#[utoipa::path(get, path = "/api/v1/custom-categories", operation_id = "list_custom_categories", tag = "policies", responses(
    (status = 200, description = "The account's custom categories.", body = CategoryList),
))]
pub(crate) async fn list(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let rows = custom_categories::list(&client, principal.account_id).await?;
    let categories: Vec<CategoryView> = rows.into_iter().map(CategoryView::from).collect();
    Ok(HttpResponse::Ok().json(CategoryList { categories }))
}

/// Creates a category: 201 with it, 409 for a taken name or a full account.
#[utoipa::path(post, path = "/api/v1/custom-categories", operation_id = "create_custom_category", tag = "policies",
    request_body = CreateBody,
    responses(
        (status = 201, description = "The new category.", body = CategoryView),
        (status = 400, description = "A field breaks its rule.", body = ErrorBody),
        (status = 409, description = "The name is taken or the account has 20 categories.",
         body = ErrorBody),
    ))]
pub(crate) async fn create(
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
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    match custom_categories::insert(&tx, principal.account_id, principal.actor(), &new).await? {
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
#[utoipa::path(patch, path = "/api/v1/custom-categories/{id}", operation_id = "change_custom_category", tag = "policies",
    params(("id" = Uuid, Path, description = "The category's id.")),
    request_body = ChangeBody,
    responses(
        (status = 200, description = "The changed category.", body = CategoryView),
        (status = 400, description = "A field breaks its rule, or none is given.",
         body = ErrorBody),
        (status = 404, description = "No such category of this account.", body = ErrorBody),
    ))]
pub(crate) async fn change(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<CustomCategoryId>,
    body: web::Json<ChangeBody>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
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
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    let row = custom_categories::update(&tx, principal.account_id, principal.actor(), id, &change)
        .await?
        .ok_or_else(not_found)?;
    tx.commit().await.map_err(DbError::from)?;
    Ok(HttpResponse::Ok().json(CategoryView::from(row)))
}

/// Deletes a category: 204.
#[utoipa::path(delete, path = "/api/v1/custom-categories/{id}", operation_id = "delete_custom_category", tag = "policies",
    params(("id" = Uuid, Path, description = "The category's id.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such category of this account.", body = ErrorBody),
    ))]
pub(crate) async fn delete(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<CustomCategoryId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    if !custom_categories::delete(&tx, principal.account_id, principal.actor(), id).await? {
        return Err(not_found());
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(HttpResponse::NoContent().finish())
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such custom category".to_owned())
}
