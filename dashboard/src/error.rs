//! The dashboard's one error type, answered as an HTML page (or, for a missing session, a
//! redirect to the sign-in page). A 5xx page is always generic; the cause goes to the log.

use std::time::Duration;

use actix_web::{
    http::{header, StatusCode},
    HttpResponse, ResponseError,
};
use askama::Template;
use moderation_shared::{db::DbError, limits::seconds_ceil};

use crate::nav::Nav;

/// Why a request was not served.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
    /// No valid session: redirect to the sign-in page.
    #[error("not signed in")]
    NotSignedIn,
    /// A posted form without the right CSRF token.
    #[error("missing or stale form token")]
    Csrf,
    /// The session may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// No such thing, or not the account's.
    #[error("not found")]
    NotFound,
    /// The request itself is wrong.
    #[error("{0}")]
    BadRequest(String),
    /// Too much is running; try again shortly.
    #[error("{0}")]
    Busy(String),
    /// The source address is locked out after failed sign-ins, for this long.
    #[error("too many failed sign-ins")]
    Locked(Duration),
    /// Anything else; logged, shown generically.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<tokio_postgres::Error> for DashboardError {
    fn from(err: tokio_postgres::Error) -> Self {
        Self::Internal(err.into())
    }
}

impl From<deadpool_postgres::PoolError> for DashboardError {
    fn from(err: deadpool_postgres::PoolError) -> Self {
        Self::Internal(err.into())
    }
}

impl From<DbError> for DashboardError {
    fn from(err: DbError) -> Self {
        Self::Internal(err.into())
    }
}

impl ResponseError for DashboardError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::NotSignedIn => StatusCode::SEE_OTHER,
            Self::Csrf | Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Locked(_) | Self::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if let Self::NotSignedIn = self {
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, "/login"))
                .finish();
        }
        let message = match self {
            Self::Csrf => "The form's security token was missing or stale. Reload the page and \
                           try again."
                .to_owned(),
            Self::NotFound => "There is nothing here, or it belongs to another account.".to_owned(),
            Self::Locked(left) => format!(
                "Too many failed sign-ins from your address. Try again in {} seconds.",
                seconds_ceil(*left)
            ),
            Self::Internal(err) => {
                tracing::error!(error = ?err, "Dashboard request failed");
                "Something went wrong on our side. Try again in a moment.".to_owned()
            }
            other => other.to_string(),
        };
        let page = ErrorPage {
            nav: None,
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            message,
        };
        let mut res = HttpResponse::build(status);
        match self {
            Self::Locked(left) => {
                res.insert_header((header::RETRY_AFTER, seconds_ceil(*left)));
            }
            Self::Busy(_) => {
                res.insert_header((header::RETRY_AFTER, 5));
            }
            _ => {}
        }
        match page.render() {
            Ok(body) => res.content_type("text/html; charset=utf-8").body(body),
            Err(_) => res.finish(),
        }
    }
}

/// The page of an error.
#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    /// No navigation: the error may be that there is no session.
    nav: Option<Nav>,
    /// The status's name.
    title: String,
    /// What went wrong, for people.
    message: String,
}
