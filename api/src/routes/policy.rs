//! Policy versions (contract 13), scope `settings:manage`: `GET /api/v1/policy`, `POST
//! /api/v1/policy/versions`, `GET /api/v1/policy/versions/{v}`, `.../activate`, `.../shadow`,
//! `.../impact`, `DELETE /api/v1/policy/shadow`. Every change writes its audit event in its
//! own transaction.

use std::collections::{BTreeMap, HashMap};

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::{self, format_millis},
    db::{
        audit_events::{self, Target},
        custom_categories, job_scores,
        policy_versions::{self, PolicyVersion, Switched},
        GenericClient,
    },
    domain::{AccountId, AuditAction},
    export::parse_instant,
    policy::{self, Impact, ImpactCounter, PolicyDoc, ReviewSettings, Rule},
};
use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};
use utoipa::{IntoParams, ToSchema};

use super::{policies::present, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/policy").route(web::get().to(overview)))
        .service(resource("/policy/versions").route(web::post().to(create)))
        .service(resource("/policy/versions/{v}").route(web::get().to(get_version)))
        .service(resource("/policy/versions/{v}/activate").route(web::post().to(activate)))
        .service(resource("/policy/versions/{v}/shadow").route(web::post().to(shadow)))
        .service(resource("/policy/versions/{v}/impact").route(web::get().to(impact)))
        .service(resource("/policy/shadow").route(web::delete().to(stop_shadow)));
}

/// The longest note, in characters.
pub const MAX_NOTE_CHARS: usize = 500;
/// The longest impact window.
pub const MAX_IMPACT_DAYS: i64 = 31;

/// A version's summary in the listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionSummary {
    /// Its number.
    version: i32,
    /// `draft`, `shadow`, `active` or `retired`.
    status: &'static str,
    /// What its author said of it.
    #[schema(required = true)]
    note: Option<String>,
    /// When it was made (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    created_at: String,
    /// When it was last activated, else `null`.
    #[schema(format = DateTime, required = true)]
    activated_at: Option<String>,
}

/// A version whole.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionView {
    /// Its number.
    version: i32,
    /// `draft`, `shadow`, `active` or `retired`.
    status: &'static str,
    /// What its author said of it.
    #[schema(required = true)]
    note: Option<String>,
    /// When it was made (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    created_at: String,
    /// When it was last activated, else `null`.
    #[schema(format = DateTime, required = true)]
    activated_at: Option<String>,
    /// Each category's rule: the text categories, `nsfw` and `custom.<name>`.
    categories: BTreeMap<String, Rule>,
    /// The review settings.
    review: ReviewSettings,
}

impl From<PolicyVersion> for VersionView {
    fn from(v: PolicyVersion) -> Self {
        Self {
            version: v.version,
            status: v.status.as_str(),
            note: v.note,
            created_at: format_millis(v.created_at),
            activated_at: v.activated_at.map(format_millis),
            categories: v.doc.categories,
            review: v.doc.review,
        }
    }
}

/// `GET /api/v1/policy`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyOverview {
    /// The active version's number.
    active: i32,
    /// The shadow version's number, else `null`.
    #[schema(required = true)]
    shadow: Option<i32>,
    /// Every version, newest first.
    versions: Vec<VersionSummary>,
}

/// The body of a new version: what differs from the active one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewVersionBody {
    /// Categories to set, each taken whole (`mode`, `block_at`, `review_at`); the others are
    /// copied from the active version.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    categories: Option<BTreeMap<String, Rule>>,
    /// The review settings; copied from the active version when absent.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false)]
    review: Option<ReviewSettings>,
    /// 1 to 500 characters.
    #[serde(default, deserialize_with = "present")]
    #[schema(nullable = false, min_length = 1, max_length = 500)]
    note: Option<String>,
}

fn not_found() -> ApiError {
    ApiError::NotFound("no such policy version".to_owned())
}

/// The active version of `account`.
async fn active(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<PolicyVersion, ApiError> {
    policy_versions::deciding(client, account)
        .await?
        .active
        .ok_or_else(|| {
            ApiError::Internal(anyhow::anyhow!("account {account} has no active policy"))
        })
}

#[utoipa::path(get, path = "/api/v1/policy", operation_id = "get_policy", tag = "policy", responses(
    (status = 200, description = "The active and shadow versions and every version, newest first.",
     body = PolicyOverview),
))]
pub(crate) async fn overview(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let versions = policy_versions::list(&client, principal.account_id).await?;
    let find = |status| {
        versions
            .iter()
            .find(|v| v.status == status)
            .map(|v| v.version)
    };
    let active = find(moderation_shared::domain::PolicyStatus::Active).ok_or_else(|| {
        ApiError::Internal(anyhow::anyhow!("account has no active policy version"))
    })?;
    let shadow = find(moderation_shared::domain::PolicyStatus::Shadow);
    Ok(HttpResponse::Ok().json(PolicyOverview {
        active,
        shadow,
        versions: versions
            .into_iter()
            .map(|v| VersionSummary {
                version: v.version,
                status: v.status.as_str(),
                note: v.note,
                created_at: format_millis(v.created_at),
                activated_at: v.activated_at.map(format_millis),
            })
            .collect(),
    }))
}

#[utoipa::path(post, path = "/api/v1/policy/versions", operation_id = "create_policy_version", tag = "policy",
    request_body = NewVersionBody,
    responses(
        (status = 201, description = "The new draft.", body = VersionView),
        (status = 400, description = "An unknown category or field, a number out of range, or \
         `review_at` at or above `block_at`.", body = ErrorBody),
    ))]
pub(crate) async fn create(
    state: web::Data<AppState>,
    principal: Principal,
    body: web::Json<NewVersionBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    if let Some(note) = &body.note {
        let chars = note.chars().count();
        if chars == 0 || chars > MAX_NOTE_CHARS || note.chars().any(char::is_control) {
            return Err(ApiError::InvalidRequest(format!(
                "note must be 1 to {MAX_NOTE_CHARS} characters without control characters"
            )));
        }
    }
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let account = principal.account_id;
    let base = active(&tx, account).await?;
    let custom = custom_categories::list(&tx, account).await?;
    let names: Vec<&str> = custom.iter().map(|c| c.name.as_str()).collect();
    let draft = policy::amend(
        base.doc.clone(),
        body.categories.unwrap_or_default(),
        body.review,
        &names,
    )
    .map_err(|e| ApiError::InvalidRequest(e.0))?;
    let version = policy_versions::insert_draft(&tx, account, &draft, body.note.as_deref()).await?;
    audit_events::record(
        &tx,
        account,
        principal.actor(),
        AuditAction::PolicyVersionCreated,
        &Target::new("policy_version", version.version),
        serde_json::json!({
            "against_active": base.version,
            "diff": policy::diff(&base.doc, &version.doc),
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(VersionView::from(version)))
}

#[utoipa::path(get, path = "/api/v1/policy/versions/{v}", operation_id = "get_policy_version", tag = "policy",
    params(("v" = i32, Path, description = "The version's number.")),
    responses(
        (status = 200, description = "The version.", body = VersionView),
        (status = 400, description = "The number is not an integer.", body = ErrorBody),
        (status = 404, description = "No such version of this account.", body = ErrorBody),
    ))]
pub(crate) async fn get_version(
    state: web::Data<AppState>,
    principal: Principal,
    v: web::Path<i32>,
) -> Result<HttpResponse, ApiError> {
    let client = state.pool.get().await?;
    let version = policy_versions::get(&client, principal.account_id, v.into_inner())
        .await?
        .ok_or_else(not_found)?;
    Ok(HttpResponse::Ok().json(VersionView::from(version)))
}

#[utoipa::path(post, path = "/api/v1/policy/versions/{v}/activate", operation_id = "activate_policy_version", tag = "policy",
    params(("v" = i32, Path, description = "The version's number.")),
    responses(
        (status = 200, description = "The version, now active (activating a retired version \
         is the rollback; activating the active one changes nothing).", body = VersionView),
        (status = 400, description = "The number is not an integer.", body = ErrorBody),
        (status = 404, description = "No such version of this account.", body = ErrorBody),
    ))]
pub(crate) async fn activate(
    state: web::Data<AppState>,
    principal: Principal,
    v: web::Path<i32>,
) -> Result<HttpResponse, ApiError> {
    let (account, number) = (principal.account_id, v.into_inner());
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let version = match policy_versions::activate(&tx, account, number).await? {
        Switched::Changed { version, previous } => {
            let before = match previous {
                Some(previous) => policy_versions::get(&tx, account, previous).await?,
                None => None,
            };
            let diff = before.as_ref().map(|b| policy::diff(&b.doc, &version.doc));
            audit_events::record(
                &tx,
                account,
                principal.actor(),
                AuditAction::PolicyActivated,
                &Target::new("policy_version", version.version),
                serde_json::json!({ "previous": previous, "diff": diff }),
            )
            .await?;
            version
        }
        Switched::Unchanged(version) | Switched::Refused(version) => version,
        Switched::NotFound => return Err(not_found()),
    };
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(VersionView::from(version)))
}

#[utoipa::path(post, path = "/api/v1/policy/versions/{v}/shadow", operation_id = "shadow_policy_version", tag = "policy",
    params(("v" = i32, Path, description = "The version's number.")),
    responses(
        (status = 200, description = "The version, now the shadow: it runs beside the active \
         version on every new job, never acting (an earlier shadow goes back to draft).",
         body = VersionView),
        (status = 400, description = "The number is not an integer.", body = ErrorBody),
        (status = 404, description = "No such version of this account.", body = ErrorBody),
        (status = 409, description = "The version is the active one.", body = ErrorBody),
    ))]
pub(crate) async fn shadow(
    state: web::Data<AppState>,
    principal: Principal,
    v: web::Path<i32>,
) -> Result<HttpResponse, ApiError> {
    let (account, number) = (principal.account_id, v.into_inner());
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let version = match policy_versions::start_shadow(&tx, account, number).await? {
        Switched::Changed { version, previous } => {
            let active = active(&tx, account).await?;
            audit_events::record(
                &tx,
                account,
                principal.actor(),
                AuditAction::PolicyShadowStarted,
                &Target::new("policy_version", version.version),
                serde_json::json!({
                    "previous_shadow": previous,
                    "against_active": active.version,
                    "diff": policy::diff(&active.doc, &version.doc),
                }),
            )
            .await?;
            version
        }
        Switched::Unchanged(version) => version,
        Switched::Refused(version) => {
            return Err(ApiError::Conflict(format!(
                "version {} is the active version; a shadow runs beside it",
                version.version
            )))
        }
        Switched::NotFound => return Err(not_found()),
    };
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(VersionView::from(version)))
}

#[utoipa::path(delete, path = "/api/v1/policy/shadow", operation_id = "stop_policy_shadow", tag = "policy",
    responses(
        (status = 204, description = "No version runs as the shadow (the one that did is a \
         draft again)."),
    ))]
pub(crate) async fn stop_shadow(
    state: web::Data<AppState>,
    principal: Principal,
) -> Result<HttpResponse, ApiError> {
    let account = principal.account_id;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    if let Some(stopped) = policy_versions::stop_shadow(&tx, account).await? {
        audit_events::record(
            &tx,
            account,
            principal.actor(),
            AuditAction::PolicyShadowStopped,
            &Target::new("policy_version", stopped),
            serde_json::json!({}),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The impact's window.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ImpactQuery {
    /// Inclusive lower bound on the jobs' creation (ISO 8601); default `to` less 7 days.
    from: Option<String>,
    /// Exclusive upper bound (ISO 8601), after `from` and at most 31 days later; default now.
    to: Option<String>,
}

/// The impact's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImpactView {
    /// Completed jobs created in the window.
    jobs: u64,
    /// Of them, those with stored scores (the others keep their decision).
    rescored: u64,
    /// Passed jobs the version would reject.
    pass_to_reject: u64,
    /// Rejected jobs the version would pass.
    reject_to_pass: u64,
    /// Jobs the version would send to review (its band or its sample).
    to_review: u64,
    /// The flips by category.
    by_category: BTreeMap<String, CategoryFlipsView>,
    /// Up to 20 job ids of each flip, oldest first.
    examples: ExamplesView,
}

/// One category's flips.
#[derive(Debug, Serialize, ToSchema)]
pub struct CategoryFlipsView {
    /// Passed jobs this category would reject.
    pass_to_reject: u64,
    /// Rejected jobs it rejected that would pass.
    reject_to_pass: u64,
}

/// Example job ids.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExamplesView {
    /// Passed jobs the version would reject (at most 20).
    #[schema(value_type = Vec<uuid::Uuid>)]
    pass_to_reject: Vec<uuid::Uuid>,
    /// Rejected jobs the version would pass (at most 20).
    #[schema(value_type = Vec<uuid::Uuid>)]
    reject_to_pass: Vec<uuid::Uuid>,
}

impl From<Impact> for ImpactView {
    fn from(impact: Impact) -> Self {
        Self {
            jobs: impact.jobs,
            rescored: impact.rescored,
            pass_to_reject: impact.pass_to_reject,
            reject_to_pass: impact.reject_to_pass,
            to_review: impact.to_review,
            by_category: impact
                .by_category
                .into_iter()
                .map(|(c, f)| {
                    (
                        c,
                        CategoryFlipsView {
                            pass_to_reject: f.pass_to_reject,
                            reject_to_pass: f.reject_to_pass,
                        },
                    )
                })
                .collect(),
            examples: ExamplesView {
                pass_to_reject: impact.examples.pass_to_reject,
                reject_to_pass: impact.examples.reject_to_pass,
            },
        }
    }
}

#[utoipa::path(get, path = "/api/v1/policy/versions/{v}/impact", operation_id = "policy_version_impact", tag = "policy",
    params(("v" = i32, Path, description = "The version's number."), ImpactQuery),
    responses(
        (status = 200, description = "The version applied to the stored scores of the \
         account's completed jobs created in the window, without running a model.",
         body = ImpactView),
        (status = 400, description = "A bound is unparsable, `from` is not before `to`, or the \
         window is over 31 days.", body = ErrorBody),
        (status = 404, description = "No such version of this account.", body = ErrorBody),
    ))]
pub(crate) async fn impact(
    state: web::Data<AppState>,
    principal: Principal,
    v: web::Path<i32>,
    query: web::Query<ImpactQuery>,
) -> Result<HttpResponse, ApiError> {
    let (from, to) = impact_window(&query, clock::now())?;
    let client = state.pool.get().await?;
    let account = principal.account_id;
    let versions = policy_versions::list(&client, account).await?;
    let number = v.into_inner();
    let doc = versions
        .iter()
        .find(|version| version.version == number)
        .map(|version| version.doc.clone())
        .ok_or_else(not_found)?;
    let deciders: HashMap<i32, PolicyDoc> =
        versions.into_iter().map(|v| (v.version, v.doc)).collect();
    let mut counter = ImpactCounter::new(&doc, &deciders);
    job_scores::window(&client, account, from, to, |row| counter.add(&row)).await?;
    Ok(HttpResponse::Ok().json(ImpactView::from(counter.finish())))
}

/// The impact's window `[from, to)` at `now`.
fn impact_window(
    query: &ImpactQuery,
    now: OffsetDateTime,
) -> Result<(OffsetDateTime, OffsetDateTime), ApiError> {
    let parse = |name: &str, value: &Option<String>| {
        value
            .as_deref()
            .map(|raw| {
                parse_instant(raw).ok_or_else(|| {
                    ApiError::InvalidRequest(format!("{name} is not an ISO 8601 date-time"))
                })
            })
            .transpose()
    };
    let to = parse("to", &query.to)?.unwrap_or(now);
    let from = parse("from", &query.from)?.unwrap_or(to - Duration::days(7));
    if from >= to {
        return Err(ApiError::InvalidRequest(
            "from must be before to".to_owned(),
        ));
    }
    if to - from > Duration::days(MAX_IMPACT_DAYS) {
        return Err(ApiError::InvalidRequest(format!(
            "the window is at most {MAX_IMPACT_DAYS} days"
        )));
    }
    Ok((from, to))
}
