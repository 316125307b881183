//! `POST /api/v1/registry/entries` (report), `GET /api/v1/registry/entries[/{id}]` (one's own
//! entries) and `POST /api/v1/registry/entries/{id}/revoke`.

use actix_web::{web, HttpResponse};
use moderation_shared::db::registry_entries::EntryView;
use moderation_shared::{
    clock,
    db::registry_entries::{self, Report, ReportOutcome},
    domain::RegistryEntryId,
    registry::{validate_text, Category},
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::IdentifierBody;
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Default and largest page of a listing.
const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 1000;

/// The report body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReportBody {
    /// The banned user's identifier.
    identifier: IdentifierBody,
    /// Why the user was banned.
    category: Category,
    /// The member's own reference: 1 to 200 characters, no control characters, no email
    /// address.
    #[schema(min_length = 1, max_length = 200)]
    member_case_ref: String,
    /// Must be true: only bans a person reviewed and upheld may be reported.
    attest_human_review: bool,
}

/// A page of the caller's entries.
#[derive(Debug, Serialize, ToSchema)]
pub struct EntryList {
    /// Oldest first.
    entries: Vec<EntryView>,
    /// Pass as `cursor` for the next page; `null` on the last.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

/// Reports an identifier: 201 with a new entry, 200 with a refreshed one, 409 when the
/// member's entry was revoked after an upheld dispute.
#[utoipa::path(post, path = "/api/v1/registry/entries", operation_id = "report_registry_entry", tag = "registry",
    request_body = ReportBody,
    responses(
        (status = 201, description = "A new entry.", body = EntryView),
        (status = 200, description = "The member's entry for this identifier and category, \
         refreshed.", body = EntryView),
        (status = 400, description = "A field breaks its rule.", body = ErrorBody),
        (status = 409, description = "The entry was revoked after an upheld dispute.",
         body = ErrorBody),
    ))]
pub(crate) async fn report(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<ReportBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let hash = body.identifier.hash("identifier")?;
    validate_text("member_case_ref", &body.member_case_ref).map_err(ApiError::InvalidRequest)?;
    if !body.attest_human_review {
        return Err(ApiError::InvalidRequest(
            "attest_human_review must be true: only bans a person reviewed and upheld may be \
             reported"
                .to_owned(),
        ));
    }
    let identifier = state.registry_key.identify(&hash);
    let now = clock::now();
    let client = state.pool.get().await?;
    let outcome = registry_entries::report(
        &client,
        &Report {
            account_id: principal.account_id,
            identifier: &identifier,
            category: body.category,
            member_case_ref: &body.member_case_ref,
        },
        now,
    )
    .await?;
    match outcome {
        ReportOutcome::Created(entry) => Ok(HttpResponse::Created().json(entry.view(now))),
        ReportOutcome::Refreshed(entry) => Ok(HttpResponse::Ok().json(entry.view(now))),
        ReportOutcome::RevokedAfterDispute => Err(ApiError::Conflict(
            "this entry was revoked after an upheld dispute and cannot be reported again"
                .to_owned(),
        )),
    }
}

/// One of the caller's own entries; another member's is 404.
#[utoipa::path(get, path = "/api/v1/registry/entries/{id}", operation_id = "get_registry_entry", tag = "registry",
    params(("id" = Uuid, Path, description = "The entry's id.")),
    responses(
        (status = 200, description = "The entry.", body = EntryView),
        (status = 400, description = "The id is not a UUID.", body = ErrorBody),
        (status = 404, description = "No such entry of this member.", body = ErrorBody),
    ))]
pub(crate) async fn get(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<RegistryEntryId>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    let client = state.pool.get().await?;
    let entry = registry_entries::get_own(&client, principal.account_id, id)
        .await?
        .ok_or_else(not_found)?;
    Ok(HttpResponse::Ok().json(entry.view(clock::now())))
}

/// Query of a listing.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// 1 to 1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// The caller's entries, oldest first: `{"entries": [...], "next_cursor": string|null}`.
#[utoipa::path(get, path = "/api/v1/registry/entries", operation_id = "list_registry_entries", tag = "registry", params(ListQuery),
    responses(
        (status = 200, description = "A page of the member's own entries.", body = EntryList),
        (status = 400, description = "A limit out of range or a bad cursor.", body = ErrorBody),
    ))]
pub(crate) async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::InvalidRequest(format!(
            "limit must be 1 to {MAX_LIMIT}, got {limit}"
        )));
    }
    let after = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(cursor) => Some(cursor.parse::<RegistryEntryId>().map_err(|_| {
            ApiError::InvalidRequest("cursor is not one this endpoint returned".to_owned())
        })?),
    };
    let client = state.pool.get().await?;
    // One more than asked says whether another page exists.
    let mut page =
        registry_entries::list_own(&client, principal.account_id, after, i64::from(limit) + 1)
            .await?;
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    let next_cursor = more
        .then(|| page.last().map(|e| e.id.to_string()))
        .flatten();
    let now = clock::now();
    let entries: Vec<_> = page.iter().map(|e| e.view(now)).collect();
    Ok(HttpResponse::Ok().json(EntryList {
        entries,
        next_cursor,
    }))
}

/// The revoke body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevokeBody {
    /// Why: 1 to 200 characters, no control characters, no email address.
    #[schema(min_length = 1, max_length = 200)]
    reason: String,
}

/// Revokes one of the caller's entries (200 with the entry). Revoking a revoked entry changes
/// nothing and answers it as it is; an entry under dispute is the operator's to decide (409).
#[utoipa::path(post, path = "/api/v1/registry/entries/{id}/revoke", operation_id = "revoke_registry_entry", tag = "registry",
    params(("id" = Uuid, Path, description = "The entry's id.")),
    request_body = RevokeBody,
    responses(
        (status = 200, description = "The revoked entry.", body = EntryView),
        (status = 400, description = "The id is not a UUID or the reason breaks its rule.",
         body = ErrorBody),
        (status = 404, description = "No such entry of this member.", body = ErrorBody),
        (status = 409, description = "The entry is under dispute: an operator decides it.",
         body = ErrorBody),
    ))]
pub(crate) async fn revoke(
    state: web::Data<AppState>,
    principal: Principal,
    id: web::Path<RegistryEntryId>,
    body: web::Json<RevokeBody>,
) -> Result<HttpResponse, ApiError> {
    let id = id.into_inner();
    validate_text("reason", &body.reason).map_err(ApiError::InvalidRequest)?;
    let now = clock::now();
    let client = state.pool.get().await?;
    let entry = registry_entries::revoke_own(&client, principal.account_id, id, &body.reason, now)
        .await?
        .ok_or_else(not_found)?;
    if entry.has_open_dispute() {
        return Err(ApiError::Conflict(
            "this entry is under dispute: an operator decides it, so it cannot be revoked now"
                .to_owned(),
        ));
    }
    Ok(HttpResponse::Ok().json(entry.view(now)))
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such registry entry".to_owned())
}
