//! `GET /api/v1/audit` (contract 13), scope `settings:manage`: the account's audit log, newest
//! first, paged by cursor.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    clock::format_millis,
    db::audit_events::{self, AuditEvent, AuditFilter},
    domain::AuditAction,
    export::parse_instant,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{cursor, resource};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/audit").route(web::get().to(list)));
}

/// Who made a change.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActorView {
    /// `key`, `user` or `operator`.
    #[serde(rename = "type")]
    kind: &'static str,
    /// The key's `key_id` or the dashboard user's `user_id`; `null` for an operator.
    #[schema(value_type = Option<uuid::Uuid>, required = true)]
    id: Option<uuid::Uuid>,
}

/// What a change was made to.
#[derive(Debug, Serialize, ToSchema)]
pub struct TargetView {
    /// What kind of thing (`policy_version`, `key`, `custom_category`, `job`, ...).
    #[serde(rename = "type")]
    kind: String,
    /// Its id; `null` for a thing without one (the account's webhook URL).
    #[schema(required = true)]
    id: Option<String>,
}

/// One event.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventView {
    /// Its id.
    #[schema(value_type = uuid::Uuid)]
    event_id: uuid::Uuid,
    /// When it happened (RFC 3339, milliseconds).
    #[schema(format = DateTime)]
    at: String,
    /// Who did it.
    actor: ActorView,
    /// What was done, e.g. `policy.activated`.
    action: &'static str,
    /// What it was done to.
    target: TargetView,
    /// The details (a policy change holds its diff).
    #[schema(value_type = Object)]
    detail: serde_json::Value,
}

impl From<AuditEvent> for EventView {
    fn from(event: AuditEvent) -> Self {
        Self {
            event_id: event.id,
            at: format_millis(event.at),
            actor: ActorView {
                kind: event.actor_type.as_str(),
                id: event.actor_id,
            },
            action: event.action.as_str(),
            target: TargetView {
                kind: event.target_type,
                id: event.target_id,
            },
            detail: event.detail,
        }
    }
}

/// A page of events.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    /// Newest first.
    events: Vec<EventView>,
    /// Pass as `cursor` for the next page; `null` on the last.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

/// The listing's query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    /// Only events at or after this (ISO 8601).
    since: Option<String>,
    /// Only events before this (ISO 8601).
    until: Option<String>,
    /// Only this action, e.g. `policy.activated`.
    action: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// 1 to 1000; default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/v1/audit", operation_id = "list_audit_events", tag = "audit", params(AuditQuery), responses(
    (status = 200, description = "A page of the account's audit log, newest first.", body = EventPage),
    (status = 400, description = "An unparsable date, an unknown action, a limit out of range \
     or a bad cursor.", body = ErrorBody),
))]
pub(crate) async fn list(
    state: web::Data<AppState>,
    principal: Principal,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let instant = |name: &str, value: Option<String>| {
        value
            .map(|raw| {
                parse_instant(&raw).ok_or_else(|| {
                    ApiError::InvalidRequest(format!("{name} is not an ISO 8601 date-time"))
                })
            })
            .transpose()
    };
    let action = query
        .action
        .map(|raw| {
            raw.parse::<AuditAction>()
                .map_err(|e| ApiError::InvalidRequest(e.to_string()))
        })
        .transpose()?;
    let limit = cursor::limit(query.limit)?;
    let filter = AuditFilter {
        since: instant("since", query.since)?,
        until: instant("until", query.until)?,
        action,
        before: query
            .cursor
            .as_deref()
            .map(cursor::decode)
            .transpose()?
            .map(|(_, id)| id),
    };
    let client = state.pool.get().await?;
    // One more than asked tells whether another page exists.
    let mut events = audit_events::page(&client, principal.account_id, &filter, limit + 1).await?;
    let next_cursor = if events.len() as i64 > limit {
        events.truncate(limit as usize);
        events.last().map(|e| cursor::encode(e.at, e.id))
    } else {
        None
    };
    Ok(HttpResponse::Ok().json(EventPage {
        events: events.into_iter().map(EventView::from).collect(),
        next_cursor,
    }))
}
