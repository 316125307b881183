//! `GET|POST|DELETE /api/v1/blocklist`: the account's own terms, each answered with the whole
//! list as `{"terms": [...]}`.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    db::{
        blocklist::{self, Added, MAX_PER_ACCOUNT},
        DbError,
    },
    policy_input::clean_terms,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// The most terms one call may add or remove.
const MAX_PER_CALL: usize = 100;

/// The add and remove body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TermsBody {
    /// 1 to 100 terms of 1 to 100 characters (surrounding whitespace trimmed).
    #[schema(min_items = 1, max_items = 100)]
    terms: Vec<String>,
}

/// The account's whole list.
#[derive(Debug, Serialize, ToSchema)]
pub struct Terms {
    /// The account's terms; they add to the service's global list.
    terms: Vec<String>,
}

/// The account's terms.
#[utoipa::path(get, path = "/api/v1/blocklist", operation_id = "list_blocklist", tag = "policies", responses(
    (status = 200, description = "The account's terms.", body = Terms),
))]
pub(crate) async fn list(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let terms = blocklist::terms(&client, principal.account_id).await?;
    Ok(whole_list(terms))
}

/// Adds terms (those already present are fine); 409 when the account would hold more than
/// [`MAX_PER_ACCOUNT`].
#[utoipa::path(post, path = "/api/v1/blocklist", operation_id = "add_blocklist_terms", tag = "policies", request_body = TermsBody,
    responses(
        (status = 200, description = "The account's whole list after the addition.", body = Terms),
        (status = 400, description = "A term or the count breaks its rule.", body = ErrorBody),
        (status = 409, description = "The account would hold more than 10,000 terms.",
         body = ErrorBody),
    ))]
pub(crate) async fn add(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<TermsBody>,
) -> Result<HttpResponse, ApiError> {
    let terms = clean_terms("terms", body.into_inner().terms, 1, MAX_PER_CALL)?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    match blocklist::add(&tx, principal.account_id, principal.actor(), &terms).await? {
        Added::Stored(stored) => {
            let all = blocklist::terms(&tx, principal.account_id).await?;
            // Nothing new: roll back, so the policy version stays and workers keep their cache.
            if stored > 0 {
                tx.commit().await.map_err(DbError::from)?;
            }
            Ok(whole_list(all))
        }
        Added::LimitExceeded { would_hold } => Err(ApiError::Conflict(format!(
            "the blocklist would hold {would_hold} terms; an account may hold at most \
             {MAX_PER_ACCOUNT}"
        ))),
    }
}

/// Removes terms (absent ones are ignored).
#[utoipa::path(delete, path = "/api/v1/blocklist", operation_id = "remove_blocklist_terms", tag = "policies", request_body = TermsBody,
    responses(
        (status = 200, description = "The account's whole list after the removal.", body = Terms),
        (status = 400, description = "A term or the count breaks its rule.", body = ErrorBody),
    ))]
pub(crate) async fn remove(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<TermsBody>,
) -> Result<HttpResponse, ApiError> {
    let terms = clean_terms("terms", body.into_inner().terms, 1, MAX_PER_CALL)?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    let removed = blocklist::remove(&tx, principal.account_id, principal.actor(), &terms).await?;
    let all = blocklist::terms(&tx, principal.account_id).await?;
    if removed > 0 {
        tx.commit().await.map_err(DbError::from)?;
    }
    Ok(whole_list(all))
}

fn whole_list(terms: Vec<String>) -> HttpResponse {
    HttpResponse::Ok().json(Terms { terms })
}
