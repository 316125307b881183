//! The switches of policy versions (contract 13, `settings:manage`): activate (a retired
//! version: the rollback), run as the shadow, stop the shadow. Each runs `policy_versions`, as
//! the api's do, with the api's audit event, the signed-in user as actor, in one transaction,
//! and answers with the version's page.

use actix_web::{web, HttpResponse};
use moderation_shared::{
    db::{
        audit_events::{self, Target},
        policy_versions::{self, PolicyVersion, Switched},
        GenericClient,
    },
    domain::{AccountId, AuditAction, Scope},
    policy,
};

use crate::{error::DashboardError, form::Posted, pages::see_other, state::AppState};

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/policy/versions/{v}/activate", web::post().to(activate))
        .route("/policy/versions/{v}/shadow", web::post().to(shadow))
        .route("/policy/shadow/stop", web::post().to(stop_shadow));
}

/// The active version of `account` (every account has one).
pub async fn active(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<PolicyVersion, DashboardError> {
    policy_versions::deciding(client, account)
        .await?
        .active
        .ok_or_else(|| anyhow::anyhow!("account {account} has no active policy").into())
}

/// The version number of a path; anything else is no version.
pub fn number(raw: &str) -> Result<i32, DashboardError> {
    raw.parse().map_err(|_| DashboardError::NotFound)
}

/// Activates the version (a retired one: the rollback); the active one retires.
async fn activate(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let session = posted.session;
    session.require(Scope::SettingsManage)?;
    let (account, number) = (session.account(), number(&path)?);
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    match policy_versions::activate(&tx, account, number).await? {
        Switched::Changed { version, previous } => {
            let before = match previous {
                Some(previous) => policy_versions::get(&tx, account, previous).await?,
                None => None,
            };
            let diff = before.as_ref().map(|b| policy::diff(&b.doc, &version.doc));
            audit_events::record(
                &tx,
                account,
                session.actor(),
                AuditAction::PolicyActivated,
                &Target::new("policy_version", version.version),
                serde_json::json!({ "previous": previous, "diff": diff }),
            )
            .await?;
        }
        Switched::Unchanged(_) | Switched::Refused(_) => {}
        Switched::NotFound => return Err(DashboardError::NotFound),
    }
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other(&format!("/policy/versions/{number}")))
}

/// Runs the version as the shadow, beside the active one; an earlier shadow goes back to
/// draft.
async fn shadow(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let session = posted.session;
    session.require(Scope::SettingsManage)?;
    let (account, number) = (session.account(), number(&path)?);
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    match policy_versions::start_shadow(&tx, account, number).await? {
        Switched::Changed { version, previous } => {
            let active = active(&tx, account).await?;
            audit_events::record(
                &tx,
                account,
                session.actor(),
                AuditAction::PolicyShadowStarted,
                &Target::new("policy_version", version.version),
                serde_json::json!({
                    "previous_shadow": previous,
                    "against_active": active.version,
                    "diff": policy::diff(&active.doc, &version.doc),
                }),
            )
            .await?;
        }
        Switched::Unchanged(_) => {}
        Switched::Refused(version) => {
            return Err(DashboardError::BadRequest(format!(
                "Version {} is the active version; a shadow runs beside it.",
                version.version
            )))
        }
        Switched::NotFound => return Err(DashboardError::NotFound),
    }
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other(&format!("/policy/versions/{number}")))
}

/// Stops the shadow, which goes back to draft.
async fn stop_shadow(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let session = posted.session;
    session.require(Scope::SettingsManage)?;
    let account = session.account();
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    if let Some(stopped) = policy_versions::stop_shadow(&tx, account).await? {
        audit_events::record(
            &tx,
            account,
            session.actor(),
            AuditAction::PolicyShadowStopped,
            &Target::new("policy_version", stopped),
            serde_json::json!({}),
        )
        .await?;
    }
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other("/policy/versions"))
}
