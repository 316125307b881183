//! The Shared Registry for members (`registry:submit`, `registry:check`): the account's own
//! entries and revoking one, reporting an identifier, and checking one. Reports and checks go
//! through the same shared functions as the api's (the registry key, `report`,
//! `find_matches`, the signals and the daily check quota), never over HTTP.
//!
//! An identifier is typed as the api takes it, the SHA-256 of the email address normalised per
//! version 1; an email address may be typed instead, and is then normalised and hashed here,
//! in memory only (never stored or logged).

use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use moderation_shared::{
    clock,
    db::{
        accounts,
        registry_entries::{self, RegistryEntry, Report, ReportOutcome},
    },
    domain::{RegistryEntryId, Scope},
    registry::{
        normalise::normalise, quota, signals, validate_text, Category, ClientHash, EntryStatus,
    },
};
use serde::Deserialize;
use time::macros::format_description;

use crate::{
    error::DashboardError,
    form::{Fields, Posted},
    nav::Nav,
    pages::{render, render_with, see_other, status_word, Stamp},
    session::Session,
    state::AppState,
};

/// Entries shown.
const LIST_LIMIT: i64 = 500;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/registry", web::get().to(list))
        .route("/registry/report", web::post().to(report))
        .route("/registry/check", web::post().to(check))
        .route("/registry/{id}/revoke", web::post().to(revoke));
}

struct EntryRow {
    entry: RegistryEntry,
    status: &'static str,
    revocable: bool,
    created: Stamp,
}

/// The report form's values, and what was wrong with them.
#[derive(Debug, Default)]
struct ReportForm {
    category: String,
    case_ref: String,
    error: Option<String>,
}

/// A signal of a check, as the page shows it.
struct SignalRow {
    category: &'static str,
    reporter_count: u32,
    first_day: String,
    last_day: String,
    automated_refusal_permitted: bool,
}

/// The answer of a check, or why there is none.
struct CheckAnswer {
    matched: bool,
    signals: Vec<SignalRow>,
}

#[derive(Template)]
#[template(path = "registry.html")]
struct RegistryPage {
    nav: Option<Nav>,
    csrf: String,
    rows: Vec<EntryRow>,
    categories: [Category; 3],
    /// What the last report did, said for people.
    reported: Option<&'static str>,
    report: ReportForm,
    check: Option<CheckAnswer>,
    check_error: Option<String>,
}

/// The page's query string.
#[derive(Debug, Default, Deserialize)]
struct Shown {
    reported: Option<String>,
}

async fn list(
    state: web::Data<AppState>,
    session: Session,
    shown: web::Query<Shown>,
) -> Result<HttpResponse, DashboardError> {
    session.require(Scope::RegistrySubmit)?;
    let reported = match shown.reported.as_deref() {
        Some("created") => Some("Reported: a new entry was made."),
        Some("refreshed") => {
            Some("Reported again: your entry was refreshed and its retention extended.")
        }
        _ => None,
    };
    let mut page = page(&state, &session).await?;
    page.reported = reported;
    render(&page)
}

async fn page(state: &AppState, session: &Session) -> Result<RegistryPage, DashboardError> {
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let now = clock::now();
    let rows = registry_entries::list_own(&client, session.account(), None, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|entry| {
            let status = entry.status(now);
            EntryRow {
                status: status_word(status),
                revocable: status == EntryStatus::Active,
                created: Stamp(entry.created_at),
                entry,
            }
        })
        .collect();
    Ok(RegistryPage {
        nav: Some(session.nav("registry")),
        csrf: session.csrf.clone(),
        rows,
        categories: Category::ALL,
        reported: None,
        report: ReportForm::default(),
        check: None,
        check_error: None,
    })
}

/// The client hash of the form's identifier: the SHA-256 (64 lowercase hex digits) of the
/// normalised email address, as the api takes it, or an email address normalised and hashed
/// here. The messages never repeat the value.
fn identifier_hash(fields: &Fields) -> Result<ClientHash, String> {
    match fields.get("identifier_type").unwrap_or("email") {
        "email" => {}
        _ => return Err("The identifier type must be email.".to_owned()),
    }
    let raw = fields
        .get("identifier")
        .ok_or_else(|| "Enter the identifier: an email address or its SHA-256.".to_owned())?;
    let hex = if raw.contains('@') {
        normalise(raw)
            .map_err(|e| format!("The email address cannot be normalised: {e}."))?
            .sha256
    } else {
        raw.to_owned()
    };
    ClientHash::parse(&hex)
        .map_err(|e| format!("The identifier must be an email address or its SHA-256, which {e}."))
}

async fn report(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::RegistrySubmit)?;
    let category = fields.get("category").unwrap_or_default();
    let case_ref = fields.get("member_case_ref").unwrap_or_default();
    let checked = identifier_hash(&fields).and_then(|hash| {
        let category = category
            .parse::<Category>()
            .map_err(|_| "Choose the category of the ban.".to_owned())?;
        validate_text("member_case_ref", case_ref).map_err(|e| format!("The case {e}."))?;
        if fields.get("attest_human_review") != Some("true") {
            return Err(
                "Confirm that a person reviewed and upheld the ban: only such bans may be \
                 reported."
                    .to_owned(),
            );
        }
        Ok((hash, category))
    });
    let (hash, category_value) = match checked {
        Ok(found) => found,
        Err(message) => {
            let mut page = page(&state, &session).await?;
            page.report = ReportForm {
                category: category.to_owned(),
                case_ref: case_ref.to_owned(),
                error: Some(message),
            };
            return render_with(&page, StatusCode::BAD_REQUEST);
        }
    };
    let identifier = state.registry_key.identify(&hash);
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let outcome = registry_entries::report(
        &client,
        &Report {
            account_id: session.account(),
            identifier: &identifier,
            category: category_value,
            member_case_ref: case_ref,
        },
        clock::now(),
    )
    .await?;
    drop(client);
    match outcome {
        ReportOutcome::Created(_) => Ok(see_other("/registry?reported=created")),
        ReportOutcome::Refreshed(_) => Ok(see_other("/registry?reported=refreshed")),
        ReportOutcome::RevokedAfterDispute => {
            let mut page = page(&state, &session).await?;
            page.report = ReportForm {
                category: category.to_owned(),
                case_ref: case_ref.to_owned(),
                error: Some(
                    "Your entry for this identifier and category was revoked after an upheld \
                     dispute: it cannot be reported again."
                        .to_owned(),
                ),
            };
            render_with(&page, StatusCode::CONFLICT)
        }
    }
}

/// Checks one identifier against other members' entries and shows the signals, on the page
/// this POST answers (a check counts against the account's daily quota, as the api's does).
async fn check(state: web::Data<AppState>, posted: Posted) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    session.require(Scope::RegistryCheck)?;
    let mut shown = page(&state, &session).await?;
    let hash = match identifier_hash(&fields) {
        Ok(hash) => hash,
        Err(message) => {
            shown.check_error = Some(message);
            return render_with(&shown, StatusCode::BAD_REQUEST);
        }
    };
    let identifier = state.registry_key.identify(&hash);
    let now = clock::now();
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    let quota_daily = accounts::get(&client, session.account())
        .await?
        .map(|a| a.check_quota_daily)
        .ok_or(DashboardError::NotSignedIn)?;
    let used = quota::count_check(&state.redis, session.account(), now)
        .await
        .map_err(anyhow::Error::from)?;
    if used > u64::from(quota_daily) {
        shown.check_error = Some(format!(
            "Your account's daily quota of {quota_daily} registry checks is used up; it resets \
             at midnight UTC."
        ));
        return render_with(&shown, StatusCode::TOO_MANY_REQUESTS);
    }
    let matches =
        registry_entries::find_matches(&client, session.account(), &[identifier], now).await?;
    let day = |at: time::OffsetDateTime| {
        at.format(format_description!("[year]-[month]-[day]"))
            .unwrap_or_default()
    };
    let signals: Vec<SignalRow> = signals::signals(&matches)
        .into_iter()
        .map(|s| SignalRow {
            category: s.category.as_str(),
            reporter_count: s.reporter_count,
            first_day: day(s.first_reported_at),
            last_day: day(s.last_reported_at),
            automated_refusal_permitted: s.automated_refusal_permitted,
        })
        .collect();
    shown.check = Some(CheckAnswer {
        matched: !signals.is_empty(),
        signals,
    });
    render(&shown)
}

async fn revoke(
    state: web::Data<AppState>,
    path: web::Path<String>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    posted.session.require(Scope::RegistrySubmit)?;
    let id: RegistryEntryId = path.parse().map_err(|_| DashboardError::NotFound)?;
    let reason = posted.fields.get("reason").unwrap_or_default();
    validate_text("reason", reason).map_err(|e| DashboardError::BadRequest(format!("{e}.")))?;
    let client = state.pool.get().await.map_err(anyhow::Error::from)?;
    registry_entries::revoke_own(&client, posted.session.account(), id, reason, clock::now())
        .await?
        .ok_or(DashboardError::NotFound)?;
    Ok(see_other("/registry"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        Fields::parse(body.as_bytes())
    }

    #[test]
    fn an_email_and_its_published_hash_are_the_same_identifier() {
        let hash = "92ee26057ed9dea2535d6c8b141d48373932476599196e00352254896db5888f";
        let from_email = identifier_hash(&fields(&[(
            "identifier",
            "Jane.Saoirse+Work@GoogleMail.com",
        )]));
        let from_hash = identifier_hash(&fields(&[("identifier", hash)]));
        assert_eq!(from_email, from_hash);
        assert!(from_hash.is_ok());
    }

    #[test]
    fn bad_identifiers_are_refused_without_repeating_them() {
        let upper = "92EE26057ED9DEA2535D6C8B141D48373932476599196E00352254896DB5888F";
        let Err(message) = identifier_hash(&fields(&[("identifier", upper)])) else {
            panic!("an uppercase hash was taken");
        };
        assert!(
            !message.contains(upper) && message.contains("64 lowercase"),
            "{message}"
        );
        assert!(identifier_hash(&fields(&[("identifier", "a@b@c")])).is_err());
        assert!(identifier_hash(&fields(&[])).is_err());
        assert!(identifier_hash(&fields(&[
            ("identifier_type", "phone"),
            ("identifier", "x@y")
        ]))
        .is_err());
    }
}
