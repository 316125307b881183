//! The audit log (contract 13, `settings:manage`): the account's events newest first, the
//! filters (action, UTC days) and the page's cursor kept in the URL, every page read from an
//! index by `audit_events::page`, the api's listing.

use std::collections::{BTreeSet, HashMap};

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::{
        api_keys,
        audit_events::{self, AuditEvent, AuditFilter},
        dashboard_users, GenericClient,
    },
    domain::{AccountId, ActorType, AuditAction, DashboardUserId, Scope},
};
use serde::Deserialize;
use time::Duration;
use uuid::Uuid;

use crate::{
    cursor,
    error::DashboardError,
    nav::Nav,
    pages::{render, Stamp},
    session::Session,
    state::AppState,
};

use super::jobs::parse_day;

/// Events per page.
const PAGE_SIZE: i64 = 50;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/audit", web::get().to(list));
}

/// The log's query string: the filters and where the page starts.
#[derive(Debug, Default, Deserialize)]
struct AuditQuery {
    action: Option<String>,
    /// The first UTC day shown.
    from: Option<String>,
    /// The last UTC day shown (included).
    until: Option<String>,
    /// Where the page starts: the `next` cursor of the page before.
    after: Option<String>,
}

fn blank_to_none(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl AuditQuery {
    /// The filter of the page, or why a filter is wrong.
    fn filter(&self) -> Result<AuditFilter, String> {
        let action = blank_to_none(&self.action)
            .map(|a| {
                a.parse::<AuditAction>()
                    .map_err(|_| format!("Unknown action {a:?}."))
            })
            .transpose()?;
        let since = blank_to_none(&self.from).map(parse_day).transpose()?;
        let until = blank_to_none(&self.until)
            .map(|d| parse_day(d).map(|at| at + Duration::days(1)))
            .transpose()?;
        let before = blank_to_none(&self.after)
            .map(|raw| {
                cursor::decode(raw).map(|(_, id)| id).ok_or_else(|| {
                    "This page link is broken: start from the first page.".to_owned()
                })
            })
            .transpose()?;
        Ok(AuditFilter {
            since,
            until,
            action,
            before,
        })
    }

    /// The query string of the same filters, starting after `after` when given.
    fn with_after(&self, after: Option<&str>) -> String {
        let mut out = url::form_urlencoded::Serializer::new(String::new());
        for (name, value) in [
            ("action", &self.action),
            ("from", &self.from),
            ("until", &self.until),
        ] {
            if let Some(value) = blank_to_none(value) {
                out.append_pair(name, value);
            }
        }
        if let Some(after) = after {
            out.append_pair("after", after);
        }
        out.finish()
    }
}

/// An event as the page shows it.
struct EventRow {
    at: Stamp,
    actor_type: &'static str,
    /// The key's prefix and name, the user's address, or the id when neither is known.
    actor: String,
    action: &'static str,
    target_type: String,
    target_id: String,
    /// The page of the target, when the dashboard has one.
    target_link: Option<String>,
    /// The detail as compact JSON.
    detail: String,
}

/// An option of the action filter.
struct Choice {
    value: &'static str,
    selected: bool,
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    nav: Option<Nav>,
    error: Option<String>,
    actions: Vec<Choice>,
    from: String,
    until: String,
    rows: Vec<EventRow>,
    /// The first page with the same filters, when this is not it.
    first: Option<String>,
    next: Option<String>,
    filtered: bool,
}

/// The names of the actors of `events` that are cheap to find: the account's keys (not
/// deleted) by prefix and name, and its users by address.
async fn actor_names(
    client: &impl GenericClient,
    account: AccountId,
    events: &[AuditEvent],
) -> Result<HashMap<Uuid, String>, DashboardError> {
    let mut names = HashMap::new();
    if events.iter().any(|e| e.actor_type == ActorType::Key) {
        for listed in api_keys::list(client, account).await? {
            let key = listed.key;
            let name = match key.name {
                Some(name) => format!("{}… ({name})", key.prefix),
                None => format!("{}…", key.prefix),
            };
            names.insert(key.key_id.0, name);
        }
    }
    let users: BTreeSet<Uuid> = events
        .iter()
        .filter(|e| e.actor_type == ActorType::User)
        .filter_map(|e| e.actor_id)
        .collect();
    for id in users {
        if let Some(user) = dashboard_users::get(client, DashboardUserId(id)).await? {
            if user.account_id == account {
                names.insert(id, user.email);
            }
        }
    }
    Ok(names)
}

/// The dashboard's page of a target, if it has one.
fn target_link(kind: &str, id: &str) -> Option<String> {
    match kind {
        "policy_version" => Some(format!("/policy/versions/{id}")),
        "job" => Some(format!("/jobs/{id}")),
        _ => None,
    }
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::SettingsManage)?;
    let page_size = usize::try_from(PAGE_SIZE).unwrap_or(usize::MAX);
    let (rows, next, error) = match query.filter() {
        Ok(filter) => {
            let client = state.pool.get().await.map_err(anyhow::Error::from)?;
            // One more than shown tells whether another page exists.
            let mut events =
                audit_events::page(&client, session.account(), &filter, PAGE_SIZE + 1).await?;
            let next = (events.len() > page_size)
                .then(|| {
                    events.truncate(page_size);
                    events
                        .last()
                        .map(|e| query.with_after(Some(&cursor::encode(e.at, e.id))))
                })
                .flatten();
            let names = actor_names(&client, session.account(), &events).await?;
            let rows = events
                .into_iter()
                .map(|event| {
                    let actor = match event.actor_id {
                        Some(id) => names.get(&id).cloned().unwrap_or_else(|| id.to_string()),
                        None => "—".to_owned(),
                    };
                    let target_id = event.target_id.unwrap_or_default();
                    EventRow {
                        at: Stamp(event.at),
                        actor_type: event.actor_type.as_str(),
                        actor,
                        action: event.action.as_str(),
                        target_link: target_link(&event.target_type, &target_id),
                        target_type: event.target_type,
                        target_id,
                        detail: event.detail.to_string(),
                    }
                })
                .collect();
            (rows, next, None)
        }
        Err(error) => (Vec::new(), None, Some(error)),
    };
    render(&AuditPage {
        nav: Some(session.nav("audit")),
        error,
        actions: AuditAction::ALL
            .iter()
            .map(|a| Choice {
                value: a.as_str(),
                selected: blank_to_none(&query.action) == Some(a.as_str()),
            })
            .collect(),
        from: blank_to_none(&query.from).unwrap_or_default().to_owned(),
        until: blank_to_none(&query.until).unwrap_or_default().to_owned(),
        rows,
        first: blank_to_none(&query.after).map(|_| query.with_after(None)),
        next,
        filtered: [&query.action, &query.from, &query.until]
            .into_iter()
            .any(|v| blank_to_none(v).is_some()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_read_and_kept_in_the_links() {
        let query = AuditQuery {
            action: Some("policy.activated".to_owned()),
            from: Some("2026-05-01".to_owned()),
            until: Some(" 2026-05-02 ".to_owned()),
            after: None,
        };

        let filter = query.filter().unwrap();

        assert_eq!(filter.action, Some(AuditAction::PolicyActivated));
        assert_eq!(
            filter.since,
            Some(time::macros::datetime!(2026-05-01 00:00 UTC))
        );
        assert_eq!(
            filter.until,
            Some(time::macros::datetime!(2026-05-03 00:00 UTC)),
            "the last day is included"
        );
        assert_eq!(
            query.with_after(Some("abc")),
            "action=policy.activated&from=2026-05-01&until=2026-05-02&after=abc"
        );
    }

    #[test]
    fn bad_filters_are_explained() {
        let bad = |query: AuditQuery| query.filter().unwrap_err();

        assert_eq!(
            bad(AuditQuery {
                action: Some("policy.deleted".to_owned()),
                ..AuditQuery::default()
            }),
            r#"Unknown action "policy.deleted"."#
        );
        assert!(bad(AuditQuery {
            from: Some("yesterday".to_owned()),
            ..AuditQuery::default()
        })
        .contains("is not a date"));
        assert!(bad(AuditQuery {
            after: Some("garbage".to_owned()),
            ..AuditQuery::default()
        })
        .contains("page link is broken"));
    }
}
