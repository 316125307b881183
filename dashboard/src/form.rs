//! Posted forms, refused unless they carry the right CSRF token.
//!
//! Every state-changing request is a POST of a form with a hidden `csrf` field. For a
//! signed-in person ([`Posted`]) it must equal the session's token; for the sign-in form
//! ([`SignInPost`]), which has no session yet, it must equal the token of the
//! [`SIGN_IN_COOKIE`] set with the form. A missing or wrong token is a 403 and nothing is done.
//! The cookies' `SameSite=Strict` already keeps other sites' requests from carrying them; the
//! token also covers browsers that ignore it.

use std::{future::Future, pin::Pin};

use actix_web::{dev::Payload, http::header, web, FromRequest, HttpRequest};

use crate::{error::DashboardError, session::Session};

/// The cookie holding the sign-in form's CSRF token.
pub const SIGN_IN_COOKIE: &str = "dashboard_sign_in";
/// The largest form body accepted.
const FORM_LIMIT: usize = 64 * 1024;

/// The fields of a posted form, in order (a name may repeat, as checkboxes do).
#[derive(Debug, Clone, Default)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    /// The first value of `name`, trimmed; `None` when absent or blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every value of `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn parse(body: &[u8]) -> Self {
        Self(url::form_urlencoded::parse(body).into_owned().collect())
    }
}

/// A form posted by a signed-in person, its CSRF token checked.
#[derive(Debug)]
pub struct Posted {
    /// The session.
    pub session: Session,
    /// The form's fields.
    pub fields: Fields,
}

impl FromRequest for Posted {
    type Error = DashboardError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, DashboardError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let session = Session::from_request(req, payload);
        let body = read_body(req, payload);
        Box::pin(async move {
            let session = session.await?;
            let fields = body.await?;
            check_token(fields.get("csrf"), Some(&session.csrf))?;
            Ok(Self { session, fields })
        })
    }
}

/// The posted sign-in form, its CSRF token checked against [`SIGN_IN_COOKIE`].
#[derive(Debug)]
pub struct SignInPost(pub Fields);

impl FromRequest for SignInPost {
    type Error = DashboardError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, DashboardError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let expected = req.cookie(SIGN_IN_COOKIE).map(|c| c.value().to_owned());
        let body = read_body(req, payload);
        Box::pin(async move {
            let fields = body.await?;
            check_token(fields.get("csrf"), expected.as_deref())?;
            Ok(Self(fields))
        })
    }
}

fn read_body(
    req: &HttpRequest,
    payload: &mut Payload,
) -> impl Future<Output = Result<Fields, DashboardError>> {
    let is_form = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let body = web::Bytes::from_request(req, payload);
    async move {
        if !is_form {
            return Err(DashboardError::BadRequest(
                "Expected a submitted form.".to_owned(),
            ));
        }
        let body = body
            .await
            .map_err(|_| DashboardError::BadRequest("The form could not be read.".to_owned()))?;
        if body.len() > FORM_LIMIT {
            return Err(DashboardError::BadRequest(
                "The form is too large.".to_owned(),
            ));
        }
        Ok(Fields::parse(&body))
    }
}

fn check_token(sent: Option<&str>, expected: Option<&str>) -> Result<(), DashboardError> {
    match (sent, expected) {
        (Some(sent), Some(expected)) if constant_time_eq(sent.as_bytes(), expected.as_bytes()) => {
            Ok(())
        }
        _ => Err(DashboardError::Csrf),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_must_be_present_and_equal() {
        assert!(check_token(Some("abc"), Some("abc")).is_ok());
        assert!(check_token(Some("abd"), Some("abc")).is_err());
        assert!(check_token(None, Some("abc")).is_err());
        assert!(check_token(Some("abc"), None).is_err());
        assert!(check_token(Some("ab"), Some("abc")).is_err());
    }

    #[test]
    fn repeated_fields_are_all_kept() {
        let fields = Fields::parse(b"scope=a&scope=b&name=+x+&empty=");
        assert_eq!(fields.all("scope").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(fields.get("name"), Some("x"));
        assert_eq!(fields.get("empty"), None);
    }
}
