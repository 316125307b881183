//! The OpenAPI 3.1 document served at `GET /api/v1/openapi.json`.
//!
//! Operations and schemas come from the handlers (`#[utoipa::path]`, `ToSchema`); the five
//! submissions are described by `submissions::document`. What every operation shares is added
//! here from the one access table, [`ENDPOINTS`]: its security requirement (the scope as the
//! requirement's role) and the errors the middleware answers before a handler runs
//! (`responses`).
//!
//! The document reads the routes; the routes never read it.

use std::sync::OnceLock;

use actix_web::{http::Method, HttpResponse};
use utoipa::{
    openapi::{
        path::{Operation, PathItem},
        security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme},
        OpenApi as Document, RefOr, Response,
    },
    OpenApi,
};

use crate::{
    auth::access::{Access, ENDPOINTS},
    error::ErrorBody,
    routes,
};

mod responses;
mod submissions;

use responses::{error, limited};

/// The security scheme every key-protected operation requires.
const BEARER: &str = "api_key";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Content moderation service",
        version = "1.0.0",
        description = "Submit text, chats, images, videos and audio for moderation; read the \
                       decision by polling or receive it by a signed webhook. Members of the \
                       Shared Registry report and check hashed identifiers of banned users.\n\n\
                       Every error is `{\"error\": CODE, \"message\": text, \"statusCode\": n}`. \
                       Authenticated answers carry `x-ratelimit-limit`, `x-ratelimit-remaining` \
                       and `x-ratelimit-reset`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        routes::health::health,
        routes::health::metrics,
        openapi_json,
        routes::me::me,
        routes::jobs::get_job,
        routes::jobs::erase_content,
        routes::jobs::get_progress,
        routes::jobs::list_jobs,
        routes::export::export,
        routes::usage::volume,
        routes::webhooks::register,
        routes::webhooks::current,
        routes::webhooks::clear,
        routes::endpoint::pause,
        routes::endpoint::resume,
        routes::endpoint::disable,
        routes::endpoint::enable,
        routes::endpoint::test,
        routes::webhooks::list_secrets,
        routes::webhooks::reveal,
        routes::webhooks::rotate,
        routes::deliveries::list,
        routes::deliveries::get,
        routes::deliveries::resend,
        routes::deliveries::recover,
        routes::registry::check::check,
        routes::registry::entries::report,
        routes::registry::entries::list,
        routes::registry::entries::get,
        routes::registry::entries::revoke,
        routes::policies::categories::list,
        routes::policies::categories::create,
        routes::policies::categories::change,
        routes::policies::categories::delete,
        routes::policies::blocklist::list,
        routes::policies::blocklist::add,
        routes::policies::blocklist::remove,
        routes::policy::overview,
        routes::policy::create,
        routes::policy::get_version,
        routes::policy::activate,
        routes::policy::shadow,
        routes::policy::stop_shadow,
        routes::policy::impact,
        routes::audit::list,
        routes::review::queue,
        routes::review::list,
        routes::review::get,
        routes::review::claim,
        routes::review::release,
        routes::review::decide,
        routes::appeals::create,
        routes::appeals::get,
        routes::appeals::decisions,
    ),
    components(schemas(ErrorBody, routes::submissions::Accepted)),
    tags(
        (name = "submissions", description = "Submit content; each gives a queued job."),
        (name = "jobs", description = "Read jobs, their progress, and export them as CSV."),
        (name = "webhooks", description = "The global webhook URL and its health (pause, \
                                        resume, disable, enable, test), the signing secrets, \
                                        and the delivery log with resend and recover."),
        (name = "account", description = "The caller's key and the account's usage."),
        (name = "registry", description = "The Shared Registry of banned users (members only)."),
        (name = "policies", description = "The account's custom categories and blocklist."),
        (name = "policy", description = "Policy versions: per-category thresholds and modes, \
                                      shadow runs, rollback and the impact preview."),
        (name = "audit", description = "The account's audit log."),
        (name = "review", description = "Human review: the queue, claims, decisions and \
                                      appeals."),
        (name = "operations", description = "Health, metrics and this document."),
    )
)]
struct ApiDoc;

/// This document.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "operations", responses(
    (status = 200, description = "The OpenAPI 3.1.0 document of this api.", body = Object),
))]
pub async fn openapi_json() -> HttpResponse {
    static JSON: OnceLock<String> = OnceLock::new();
    let json = JSON.get_or_init(|| {
        serde_json::to_string(&document()).unwrap_or_else(|e| {
            tracing::error!(error = %e, "Could not render the OpenAPI document");
            String::from("{}")
        })
    });
    HttpResponse::Ok()
        .content_type("application/json")
        .body(json.as_str())
}

/// Builds the whole document.
pub fn document() -> Document {
    let mut doc = ApiDoc::openapi();
    submissions::document(&mut doc);
    alias_root_reveal(&mut doc);
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("msk_<prefix>_<secret>")
                    .description(Some(
                        "An api key: `Authorization: Bearer msk_…`. A requirement's list names \
                         the scope the key must carry.",
                    ))
                    .build(),
            ),
        );
    for endpoint in ENDPOINTS {
        if let Some(operation) = operation_mut(&mut doc, &endpoint.method, endpoint.path) {
            apply_access(operation, endpoint.access);
        }
    }
    doc
}

/// `/me/webhook-secrets/reveal` answers like its `/api/v1` twin (the spec names both).
fn alias_root_reveal(doc: &mut Document) {
    let Some(mut item) = doc
        .paths
        .paths
        .get("/api/v1/me/webhook-secrets/reveal")
        .cloned()
    else {
        return;
    };
    if let Some(post) = item.post.as_mut() {
        post.operation_id = Some("reveal_outside_api_v1".to_owned());
    }
    doc.paths
        .paths
        .insert("/me/webhook-secrets/reveal".to_owned(), item);
}

/// The operation documented for `method` on `path`.
pub fn operation_mut<'a>(
    doc: &'a mut Document,
    method: &Method,
    path: &str,
) -> Option<&'a mut Operation> {
    let item: &mut PathItem = doc.paths.paths.get_mut(path)?;
    match *method {
        Method::GET => item.get.as_mut(),
        Method::POST => item.post.as_mut(),
        Method::PUT => item.put.as_mut(),
        Method::PATCH => item.patch.as_mut(),
        Method::DELETE => item.delete.as_mut(),
        _ => None,
    }
}

/// Sets the security requirement and adds the errors answered before a handler runs.
fn apply_access(operation: &mut Operation, access: Access) {
    let requirements = match access {
        Access::Public => {
            operation.security = Some(Vec::new());
            return;
        }
        Access::AnyKey => vec![SecurityRequirement::new(BEARER, Vec::<String>::new())],
        Access::Scope(scope) => vec![SecurityRequirement::new(BEARER, [scope.as_str()])],
        Access::EitherScope(first, second) => vec![
            SecurityRequirement::new(BEARER, [first.as_str()]),
            SecurityRequirement::new(BEARER, [second.as_str()]),
        ],
    };
    operation.security = Some(requirements);
    let responses = &mut operation.responses.responses;
    let mut add = |status: &str, response: Response| {
        responses
            .entry(status.to_owned())
            .or_insert(RefOr::T(response));
    };
    add(
        "401",
        error("The key is missing, malformed, unknown, disabled or expired (`UNAUTHORIZED`)."),
    );
    add(
        "403",
        error(
            "The key lacks the scope (`FORBIDDEN`) or its account was terminated \
             (`ACCOUNT_TERMINATED`).",
        ),
    );
    add(
        "429",
        limited(
            "The account's rate limit is used up, or the source address is locked out after \
             failed authentications (`RATE_LIMITED`).",
        ),
    );
    add(
        "500",
        error("An unexpected failure (`INTERNAL_ERROR`); the body is generic."),
    );
    add(
        "503",
        error(
            "Postgres or Redis is unavailable (`SERVICE_UNAVAILABLE`); a submission already \
             persisted carries its `job_id`.",
        ),
    );
    if operation.request_body.is_some() {
        add(
            "413",
            error("The body is over its limit (`PAYLOAD_TOO_LARGE`)."),
        );
        add(
            "415",
            error("The body's content type is not the one documented (`UNSUPPORTED_MEDIA_TYPE`)."),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_of_the_access_table_is_documented_and_nothing_else() {
        let mut doc = document();
        for endpoint in ENDPOINTS {
            assert!(
                operation_mut(&mut doc, &endpoint.method, endpoint.path).is_some(),
                "{} {} is not documented",
                endpoint.method,
                endpoint.path
            );
        }
        let documented: usize = doc
            .paths
            .paths
            .values()
            .map(|item| {
                [&item.get, &item.post, &item.put, &item.patch, &item.delete]
                    .into_iter()
                    .filter(|op| op.is_some())
                    .count()
            })
            .sum();
        assert_eq!(documented, ENDPOINTS.len());
    }

    #[test]
    fn a_scoped_operation_requires_its_scope_and_a_public_one_nothing() {
        let doc = serde_json::to_value(document()).unwrap();
        let check = &doc["paths"]["/api/v1/registry/check"]["post"];
        assert_eq!(check["security"][0][BEARER][0], "registry:check");
        assert!(check["responses"]["403"].is_object());
        assert_eq!(
            doc["paths"]["/health"]["get"]["security"],
            serde_json::json!([])
        );
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], "1.0.0");
    }
}
