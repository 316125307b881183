//! `modctl audit --org ORG [--since DATE]`: an account's audit log as JSON lines, newest first,
//! in the shape `GET /api/v1/audit` answers.

use anyhow::{anyhow, Context};
use clap::Args;
use moderation_shared::{
    clock::format_millis,
    db::{
        audit_events::{self, AuditFilter},
        Pool,
    },
    domain::AccountId,
    export::parse_instant,
};
use serde_json::{json, Value};

/// The `audit` command's arguments.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The account.
    #[arg(long)]
    org: AccountId,
    /// Only events at or after this (ISO 8601).
    #[arg(long)]
    since: Option<String>,
}

/// Events read per query.
const PAGE: i64 = 1000;

/// Every event of the account since `--since`, newest first.
pub async fn run(pool: &Pool, args: AuditArgs) -> anyhow::Result<Vec<Value>> {
    let since = args
        .since
        .map(|raw| parse_instant(&raw).ok_or_else(|| anyhow!("--since: not an ISO 8601 date-time")))
        .transpose()?;
    let client = pool.get().await.context("cannot reach Postgres")?;
    let mut filter = AuditFilter {
        since,
        ..AuditFilter::default()
    };
    let mut lines = Vec::new();
    loop {
        let page = audit_events::page(&client, args.org, &filter, PAGE).await?;
        let full = page.len() as i64 == PAGE;
        filter.before = page.last().map(|e| e.id);
        lines.extend(page.into_iter().map(|event| {
            json!({
                "event_id": event.id,
                "at": format_millis(event.at),
                "actor": {"type": event.actor_type.as_str(), "id": event.actor_id},
                "action": event.action.as_str(),
                "target": {"type": event.target_type, "id": event.target_id},
                "detail": event.detail,
            })
        }));
        if !full {
            return Ok(lines);
        }
    }
}
