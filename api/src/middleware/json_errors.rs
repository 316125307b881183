//! The contract's error body for the framework's own errors.

use actix_web::{
    body::{BoxBody, EitherBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::header,
    middleware::Next,
    HttpResponse,
};

use crate::error::{ErrorBody, ErrorCode};

/// Rewrites any error response that is not already JSON (the framework's 404, 405, 413,
/// payload errors and so on) into the contract's error body.
pub async fn json_errors(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, BoxBody>>, actix_web::Error> {
    let res = next.call(req).await?;
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return Ok(res.map_into_left_body());
    }
    let code = ErrorCode::for_status(status);
    let (req, old) = res.into_parts();
    let mut replacement = HttpResponse::build(status);
    for (name, value) in old.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            replacement.append_header((name.clone(), value.clone()));
        }
    }
    let replacement = replacement.json(ErrorBody {
        error: code.as_str(),
        message: code.default_message().to_owned(),
        status_code: status.as_u16(),
        job_id: None,
    });
    Ok(ServiceResponse::new(req, replacement).map_into_right_body())
}
