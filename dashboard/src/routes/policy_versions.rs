//! Policy versions (contract 13, `settings:manage`): every version with its diff against the
//! active one and the form making a draft (`/policy/versions`); one version with its rules,
//! its diff, its impact over the last 7 days and the buttons of its status
//! (`/policy/versions/{v}`, the switches are `policy_switches`).
//!
//! A draft goes through `policy::amend`, as the api's does, and is stored with the api's audit
//! event, the signed-in user as actor, in one transaction.

use std::collections::HashMap;

use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    db::{
        audit_events::{self, Target},
        custom_categories, job_scores, policy_versions, GenericClient,
    },
    domain::{AccountId, AuditAction, PolicyStatus, Scope},
    policy::{self, Impact, ImpactCounter, Mode, PolicyDoc},
};
use time::Duration;

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, render_with, see_other, stamp_or_dash, Stamp},
    policy_form::{policy_categories, DraftForm},
    policy_view::{describe, diff_rows, DiffRow},
    session::Session,
    state::AppState,
};

use super::policy_switches::{active, number};

/// The days before now whose jobs a version's impact is computed over.
const IMPACT_DAYS: i64 = 7;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/policy/versions", web::get().to(list))
        .route("/policy/versions", web::post().to(create))
        .route("/policy/versions/{v}", web::get().to(detail));
}

/// A version on the list.
struct VersionRow {
    version: i32,
    status: &'static str,
    note: String,
    created: Stamp,
    activated: String,
    /// What it changes of the active version (empty for the active one).
    diff: Vec<DiffRow>,
}

#[derive(Template)]
#[template(path = "policy_versions.html")]
struct VersionsPage {
    nav: Option<Nav>,
    csrf: String,
    active: i32,
    shadow: Option<i32>,
    versions: Vec<VersionRow>,
    /// The draft form: filled from the active version, or as typed when refused.
    form: DraftForm,
    /// The modes a category's select offers.
    modes: Vec<&'static str>,
    /// Why the draft was refused.
    error: Option<String>,
}

/// The policy categories of `account`: the fixed ones and its custom categories.
async fn categories_of(
    client: &impl GenericClient,
    account: AccountId,
) -> Result<Vec<String>, DashboardError> {
    let custom = custom_categories::list(client, account).await?;
    let names: Vec<&str> = custom.iter().map(|c| c.name.as_str()).collect();
    Ok(policy_categories(&names))
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::SettingsManage)?;
    page(&state, &session, None).await
}

/// The list, with a refused draft shown again in its form (answered 400).
async fn page(
    state: &AppState,
    session: &Session,
    refused: Option<(DraftForm, String)>,
) -> Result<HttpResponse, DashboardError> {
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let account = session.account();
    let versions = policy_versions::list(&client, account).await?;
    let active = versions
        .iter()
        .find(|v| v.status == PolicyStatus::Active)
        .ok_or_else(|| anyhow::anyhow!("account {account} has no active policy"))?;
    let shadow = versions
        .iter()
        .find(|v| v.status == PolicyStatus::Shadow)
        .map(|v| v.version);
    let (form, error, status) = match refused {
        Some((form, error)) => (form, Some(error), StatusCode::BAD_REQUEST),
        None => {
            let categories = categories_of(&client, account).await?;
            let form = DraftForm::filled(&active.doc, &categories);
            (form, None, StatusCode::OK)
        }
    };
    let rows = versions
        .iter()
        .map(|v| VersionRow {
            version: v.version,
            status: v.status.as_str(),
            note: v.note.clone().unwrap_or_default(),
            created: Stamp(v.created_at),
            activated: stamp_or_dash(v.activated_at),
            diff: if v.status == PolicyStatus::Active {
                Vec::new()
            } else {
                diff_rows(&policy::diff(&active.doc, &v.doc))
            },
        })
        .collect();
    render_with(
        &VersionsPage {
            nav: Some(session.nav("policy")),
            csrf: session.csrf.clone(),
            active: active.version,
            shadow,
            versions: rows,
            form,
            modes: Mode::ALL.iter().map(|m| m.as_str()).collect(),
            error,
        },
        status,
    )
}

/// Makes a draft from the form, checked as the api checks a new version; a refused form is
/// shown again with what was typed and nothing is stored.
async fn create(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::SettingsManage)?;
    let account = session.account();
    let mut client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let tx = client.transaction().await.map_err(anyhow::Error::from)?;
    let base = active(&tx, account).await?;
    let custom = custom_categories::list(&tx, account).await?;
    let names: Vec<&str> = custom.iter().map(|c| c.name.as_str()).collect();
    let form = DraftForm::read(&fields, &base.doc, &policy_categories(&names));
    let against = fields.get("against").and_then(|v| v.parse::<i32>().ok());
    let checked = if against == Some(base.version) {
        form.note()
            .and_then(|note| Ok((form.draft(&base.doc, &names)?, note)))
            .map_err(|message| format!("The draft was refused: {message}."))
    } else {
        Err(format!(
            "Version {} was activated after this form was shown. Check the values against it \
             and create the draft again.",
            base.version
        ))
    };
    let (doc, note) = match checked {
        Ok(checked) => checked,
        Err(message) => {
            drop(tx);
            drop(client);
            return page(&state, &session, Some((form, message))).await;
        }
    };
    let version = policy_versions::insert_draft(&tx, account, &doc, note).await?;
    audit_events::record(
        &tx,
        account,
        session.actor(),
        AuditAction::PolicyVersionCreated,
        &Target::new("policy_version", version.version),
        serde_json::json!({
            "against_active": base.version,
            "diff": policy::diff(&base.doc, &version.doc),
        }),
    )
    .await?;
    tx.commit().await.map_err(anyhow::Error::from)?;
    Ok(see_other(&format!("/policy/versions/{}", version.version)))
}

/// A category's rule in a version.
struct RuleRow {
    category: String,
    rule: String,
}

#[derive(Template)]
#[template(path = "policy_version.html")]
struct VersionPage {
    nav: Option<Nav>,
    csrf: String,
    version: i32,
    status: &'static str,
    note: String,
    created: Stamp,
    activated: String,
    rules: Vec<RuleRow>,
    sample_rate: f64,
    active: i32,
    /// What it changes of the active version.
    diff: Vec<DiffRow>,
    impact: Impact,
    impact_from: Stamp,
    impact_to: Stamp,
}

/// One version: its rules, its diff against the active one, and its impact over the last 7
/// days, computed as the api's impact preview computes it. Another account's is a 404.
async fn detail(
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::SettingsManage)?;
    let number = number(&path)?;
    let account = session.account();
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let versions = policy_versions::list(&client, account).await?;
    let version = versions
        .iter()
        .find(|v| v.version == number)
        .cloned()
        .ok_or(DashboardError::NotFound)?;
    let active = versions
        .iter()
        .find(|v| v.status == PolicyStatus::Active)
        .ok_or_else(|| anyhow::anyhow!("account {account} has no active policy"))?;
    let diff = diff_rows(&policy::diff(&active.doc, &version.doc));
    let active = active.version;
    let rules = categories_of(&client, account)
        .await?
        .into_iter()
        .map(|category| RuleRow {
            rule: describe(Some(&version.doc.rule(&category))),
            category,
        })
        .collect();
    let to = clock::now();
    let from = to - Duration::days(IMPACT_DAYS);
    let deciders: HashMap<i32, PolicyDoc> =
        versions.into_iter().map(|v| (v.version, v.doc)).collect();
    let mut counter = ImpactCounter::new(&version.doc, &deciders);
    job_scores::window(&client, account, from, to, |row| counter.add(&row)).await?;
    let impact = counter.finish();
    render(&VersionPage {
        nav: Some(session.nav("policy")),
        csrf: session.csrf.clone(),
        version: version.version,
        status: version.status.as_str(),
        note: version.note.unwrap_or_default(),
        created: Stamp(version.created_at),
        activated: stamp_or_dash(version.activated_at),
        rules,
        sample_rate: version.doc.review.sample_rate,
        active,
        diff,
        impact,
        impact_from: Stamp(from),
        impact_to: Stamp(to),
    })
}
