//! A signed-in person: the [`Session`] extractor and what a session may do.
//!
//! Every request reads the user again from Postgres, so disabling a user or terminating its
//! account ends its sessions at once.

use std::{future::Future, pin::Pin};

use actix_web::{dev::Payload, web, FromRequest, HttpRequest};
use moderation_shared::{
    db::{
        audit_events::Actor,
        dashboard_users::{self, DashboardUser},
        endpoints,
    },
    domain::{AccountId, EndpointState, Scope},
};

use crate::{error::DashboardError, nav::Nav, sessions::COOKIE, state::AppState};

/// A signed-in person, extracted from the session cookie. A request without a valid session
/// is answered with a redirect to the sign-in page.
#[derive(Debug, Clone)]
pub struct Session {
    /// The cookie's token.
    pub token: String,
    /// The session's CSRF token, which every form of the session carries.
    pub csrf: String,
    /// Who is signed in, read afresh.
    pub user: DashboardUser,
    /// The account's webhook URL state while it is not `active`, read afresh.
    pub webhook_state: Option<EndpointState>,
}

impl Session {
    /// The account the session acts for.
    pub fn account(&self) -> AccountId {
        self.user.account_id
    }

    /// The signed-in user, as the audit log names who made a change.
    pub fn actor(&self) -> Actor {
        Actor::User(self.user.id)
    }

    /// What the session may do: every client scope, `webhook:manage`, `usage:read` and
    /// `settings:manage`; the registry scopes for members; `admin:config` for staff.
    pub fn scopes(&self) -> Vec<Scope> {
        Scope::ALL
            .into_iter()
            .filter(|scope| match scope {
                Scope::AdminConfig => self.user.staff,
                s if s.needs_registry_membership() => self.user.registry_member,
                _ => true,
            })
            .collect()
    }

    /// The navigation bar of a page of this session, with `here` marked.
    pub fn nav(&self, here: &'static str) -> Nav {
        Nav {
            email: self.user.email.clone(),
            staff: self.user.staff,
            member: self.user.registry_member,
            csrf: self.csrf.clone(),
            here,
            webhook_state: self.webhook_state.map(EndpointState::as_str),
        }
    }

    /// Refuses unless the session carries `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), DashboardError> {
        if self.scopes().contains(&scope) {
            Ok(())
        } else {
            Err(DashboardError::Forbidden(match scope {
                Scope::AdminConfig => "This page is for staff only.".to_owned(),
                s if s.needs_registry_membership() => {
                    "This page is for vetted Shared Registry members only.".to_owned()
                }
                s => format!("Your session lacks the scope {s}."),
            }))
        }
    }
}

impl FromRequest for Session {
    type Error = DashboardError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, DashboardError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let token = req.cookie(COOKIE).map(|c| c.value().to_owned());
        Box::pin(async move {
            let state = state.ok_or_else(|| anyhow::anyhow!("application state missing"))?;
            let token = token.ok_or(DashboardError::NotSignedIn)?;
            let stored = state
                .sessions
                .load(&token)
                .await?
                .ok_or(DashboardError::NotSignedIn)?;
            let client = state.pool.get().await.map_err(anyhow::Error::from)?;
            let user = dashboard_users::get(&client, stored.user_id)
                .await?
                .filter(DashboardUser::is_active);
            let Some(user) = user else {
                state.sessions.close(&token).await?;
                return Err(DashboardError::NotSignedIn);
            };
            let webhook_state = endpoints::get(&client, user.account_id)
                .await?
                .map(|e| e.health.state)
                .filter(|s| *s != EndpointState::Active);
            Ok(Session {
                token,
                csrf: stored.csrf,
                user,
                webhook_state,
            })
        })
    }
}
