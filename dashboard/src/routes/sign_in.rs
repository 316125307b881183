//! Signing in and out.
//!
//! A failed sign-in counts as a failed authentication of its source address, in the same
//! Redis counters as the api's bad keys ([`moderation_shared::limits`]); a locked address is
//! refused before any password is checked. Each sign-in opens a new session (a token known
//! before it is worthless after it).

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use askama::Template;
use moderation_shared::{
    client_ip::client_ip,
    db::dashboard_users::{self, DashboardUser},
    limits::Verdict,
    passwords,
};

use crate::{
    error::DashboardError,
    form::{Posted, SignInPost, SIGN_IN_COOKIE},
    nav::Nav,
    pages::see_other,
    sessions::{self, random_token, COOKIE},
    state::AppState,
};

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/login", web::get().to(form))
        .route("/login", web::post().to(sign_in))
        .route("/logout", web::post().to(sign_out));
}

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage {
    nav: Option<Nav>,
    csrf: String,
    email: String,
    error: Option<&'static str>,
}

async fn form(state: web::Data<AppState>) -> Result<HttpResponse, DashboardError> {
    page(&state, String::new(), None, StatusCode::OK)
}

/// The form with a fresh CSRF token in its cookie.
fn page(
    state: &AppState,
    email: String,
    error: Option<&'static str>,
    status: StatusCode,
) -> Result<HttpResponse, DashboardError> {
    let csrf = random_token()?;
    let body = SignInPage {
        nav: None,
        csrf: csrf.clone(),
        email,
        error,
    }
    .render()
    .map_err(anyhow::Error::from)?;
    Ok(HttpResponse::build(status)
        .cookie(sessions::cookie(
            SIGN_IN_COOKIE,
            csrf,
            state.insecure_cookies,
        ))
        .content_type("text/html; charset=utf-8")
        .body(body))
}

async fn sign_in(
    state: web::Data<AppState>,
    req: HttpRequest,
    SignInPost(fields): SignInPost,
) -> Result<HttpResponse, DashboardError> {
    let source = source_of(&req, &state);
    if let Verdict::Locked(left) = state.limiter.check_lock(source).await {
        return Err(DashboardError::Locked(left));
    }
    let email = fields.get("email").unwrap_or_default().to_owned();
    let password = fields.get("password").unwrap_or_default().to_owned();
    let user = {
        let client = state.pool.get().await.map_err(anyhow::Error::from)?;
        dashboard_users::find_by_email(&client, &email).await?
    };
    let hash = user
        .as_ref()
        .map_or_else(|| state.decoy_hash.clone(), |u| u.password_hash.clone());
    // Argon2 takes tens of milliseconds of CPU: off the request threads.
    let matches = web::block(move || passwords::verify(&password, &hash))
        .await
        .map_err(anyhow::Error::from)?;
    let user = match user {
        Some(user) if matches && user.disabled_at.is_none() => user,
        _ => {
            if let Verdict::Locked(left) = state.limiter.record_failure(source).await {
                return Err(DashboardError::Locked(left));
            }
            tracing::info!(%source, "Dashboard sign-in failed");
            return page(
                &state,
                email,
                Some("Wrong email or password."),
                StatusCode::UNAUTHORIZED,
            );
        }
    };
    if user.account_terminated {
        return page(
            &state,
            email,
            Some("This account is terminated."),
            StatusCode::FORBIDDEN,
        );
    }
    open_session(&state, &user).await
}

async fn open_session(
    state: &AppState,
    user: &DashboardUser,
) -> Result<HttpResponse, DashboardError> {
    let token = state.sessions.open(user.id).await?;
    tracing::info!(user = %user.id, account = %user.account_id, "Dashboard sign-in");
    let mut res = see_other("/");
    res.add_cookie(&sessions::cookie(COOKIE, token, state.insecure_cookies))
        .map_err(anyhow::Error::from)?;
    res.add_cookie(&sessions::removal(SIGN_IN_COOKIE, state.insecure_cookies))
        .map_err(anyhow::Error::from)?;
    Ok(res)
}

async fn sign_out(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    state.sessions.close(&posted.session.token).await?;
    let mut res = see_other("/login");
    res.add_cookie(&sessions::removal(COOKIE, state.insecure_cookies))
        .map_err(anyhow::Error::from)?;
    Ok(res)
}

/// The source address of a sign-in, as the api finds it for a key.
fn source_of(req: &HttpRequest, state: &AppState) -> std::net::IpAddr {
    let peer = req
        .peer_addr()
        .map_or(std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), |a| {
            a.ip()
        });
    if state.trusted_proxies.is_empty() {
        return peer;
    }
    let forwarded = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok());
    client_ip(peer, forwarded, &state.trusted_proxies)
}
