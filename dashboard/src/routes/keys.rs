//! API keys: create (the full key shown once), list, rename, disable, enable, delete.
//!
//! A created key's full value is kept for the creator's session as a one-time notice and the
//! browser is redirected to the list, which takes the notice: the value is on that one page
//! and never again (a reload shows only the prefix).

use actix_web::{web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::api_keys,
    domain::{ApiKeyId, Scope},
    provisioning::{self, ProvisionError},
};

use crate::{
    error::DashboardError,
    form::Posted,
    nav::Nav,
    pages::{render, see_other, stamp_or_dash, Stamp},
    session::Session,
    state::AppState,
};

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/keys", web::get().to(list))
        .route("/keys", web::post().to(create))
        .route("/keys/{id}/rename", web::post().to(rename))
        .route("/keys/{id}/disable", web::post().to(disable))
        .route("/keys/{id}/enable", web::post().to(enable))
        .route("/keys/{id}/delete", web::post().to(delete));
}

/// One row of the list.
struct KeyRow {
    id: ApiKeyId,
    prefix: String,
    name: String,
    scopes: String,
    enabled: bool,
    created: Stamp,
    last_used: String,
}

/// A scope the creation form offers.
struct ScopeChoice {
    name: &'static str,
    checked: bool,
}

#[derive(Template)]
#[template(path = "keys.html")]
struct KeysPage {
    nav: Option<Nav>,
    csrf: String,
    new_key: Option<String>,
    keys: Vec<KeyRow>,
    choices: Vec<ScopeChoice>,
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, DashboardError> {
    let new_key = state.sessions.take_notice(&session.token).await?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let keys = api_keys::list(&client, session.account())
        .await?
        .into_iter()
        .map(|listed| KeyRow {
            id: listed.key.key_id,
            prefix: listed.key.prefix,
            name: listed.key.name.unwrap_or_default(),
            scopes: listed.key.scopes.join(", "),
            enabled: listed.key.enabled,
            created: Stamp(listed.key.created_at),
            last_used: stamp_or_dash(listed.last_used_at),
        })
        .collect();
    let choices = issuable(&session)
        .into_iter()
        .map(|scope| ScopeChoice {
            name: scope.as_str(),
            checked: Scope::CLIENT_DEFAULT.contains(&scope),
        })
        .collect();
    render(&KeysPage {
        nav: Some(session.nav("keys")),
        csrf: session.csrf.clone(),
        new_key,
        keys,
        choices,
    })
}

/// The scopes this session may put on a key: its own, less `admin:config`.
fn issuable(session: &Session) -> Vec<Scope> {
    session
        .scopes()
        .into_iter()
        .filter(|s| s.issuable_to_keys())
        .collect()
}

async fn create(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    let name = checked_name(fields.get("name"))?;
    let allowed = issuable(&session);
    let scopes = fields
        .all("scope")
        .map(|raw| {
            raw.parse::<Scope>()
                .ok()
                .filter(|s| allowed.contains(s))
                .ok_or_else(|| DashboardError::BadRequest(format!("Unknown scope {raw:?}.")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if scopes.is_empty() {
        return Err(DashboardError::BadRequest(
            "Choose at least one scope for the key.".to_owned(),
        ));
    }
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let issued = provisioning::issue_key(
        &tx,
        session.actor(),
        session.account(),
        name,
        Some(&scopes),
        None,
    )
    .await
    .map_err(|err| match err {
        ProvisionError::Db(err) => err.into(),
        ProvisionError::Random(err) => DashboardError::Internal(err.into()),
        other => DashboardError::BadRequest(other.to_string()),
    })?;
    tx.commit().await?;
    tracing::info!(key = %issued.key_id, account = %session.account(), "Key created from the dashboard");
    state
        .sessions
        .put_notice(&session.token, &issued.key)
        .await?;
    Ok(see_other("/keys"))
}

fn checked_name(name: Option<&str>) -> Result<Option<&str>, DashboardError> {
    match name {
        Some(name) if name.chars().count() > 200 => Err(DashboardError::BadRequest(
            "A key's name is at most 200 characters.".to_owned(),
        )),
        other => Ok(other),
    }
}

/// The key of the path, if it is the session's account's and not deleted.
async fn owned_key(
    state: &AppState,
    session: &Session,
    id: &str,
) -> Result<(ApiKeyId, deadpool_postgres::Object), DashboardError> {
    let id: ApiKeyId = id.parse().map_err(|_| DashboardError::NotFound)?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    if !api_keys::is_owned(&client, session.account(), id).await? {
        return Err(DashboardError::NotFound);
    }
    Ok((id, client))
}

async fn rename(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let (id, mut client) = owned_key(&state, &posted.session, &path).await?;
    let name = checked_name(posted.fields.get("name"))?
        .ok_or_else(|| DashboardError::BadRequest("Enter a name for the key.".to_owned()))?;
    let tx = client.transaction().await?;
    api_keys::rename(&tx, posted.session.actor(), id, name).await?;
    tx.commit().await?;
    Ok(see_other("/keys"))
}

async fn disable(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let (id, mut client) = owned_key(&state, &posted.session, &path).await?;
    let tx = client.transaction().await?;
    api_keys::set_enabled(&tx, posted.session.actor(), id, false).await?;
    tx.commit().await?;
    Ok(see_other("/keys"))
}

async fn enable(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let (id, mut client) = owned_key(&state, &posted.session, &path).await?;
    let tx = client.transaction().await?;
    api_keys::set_enabled(&tx, posted.session.actor(), id, true).await?;
    tx.commit().await?;
    Ok(see_other("/keys"))
}

async fn delete(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let (id, mut client) = owned_key(&state, &posted.session, &path).await?;
    let tx = client.transaction().await?;
    api_keys::delete(&tx, posted.session.actor(), id).await?;
    tx.commit().await?;
    Ok(see_other("/keys"))
}
