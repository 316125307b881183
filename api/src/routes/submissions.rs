//! The five submission endpoints: validate, persist, enqueue, answer 202.
//!
//! With an `Idempotency-Key` header, the same key and the same request from the same account
//! within 24 hours answer the first job again (with `idempotent-replayed: true`) and create
//! nothing; another request with that key is 409. The request is compared by a fingerprint of
//! its endpoint and validated fields (see [`Submission::fingerprint`]).

use actix_web::{web, HttpRequest, HttpResponse};
use moderation_shared::{
    batch::BatchError,
    db::jobs::NewJob,
    domain::{
        ChatMessage, Idempotency, IdempotencyKey, JobId, JobStatus, Modality, RequestFingerprint,
    },
    url_guard::{UrlError, UrlUse},
};
use serde::Serialize;
use utoipa::ToSchema;

use super::resource;
use crate::{
    auth::Principal,
    error::ApiError,
    intake::Persisted,
    multipart::{read_form, Allowances, Form, Part},
    state::AppState,
};

/// The most messages a chat may have.
pub const MAX_CHAT_MESSAGES: usize = 500;
/// The request header naming a submission's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// The response header marking the answer of a replayed submission.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// Registers the routes under the `/api/v1` scope.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/moderate/prompt").route(web::post().to(prompt)))
        .service(resource("/moderate/chat").route(web::post().to(chat)))
        .service(media_resource(Modality::Image))
        .service(media_resource(Modality::Video))
        .service(media_resource(Modality::Audio));
}

/// `/moderate/{image,video,audio}`: one handler, told its modality by the resource.
fn media_resource(modality: Modality) -> actix_web::Resource {
    resource(&format!("/moderate/{modality}"))
        .app_data(web::Data::new(modality))
        .route(web::post().to(media))
}

/// The 202 answer of every submission.
#[derive(Debug, Serialize, ToSchema)]
pub struct Accepted {
    /// The new job; on a replay, the job the `Idempotency-Key` first created.
    #[schema(value_type = uuid::Uuid)]
    job_id: JobId,
    /// Always `queued`, also on a replay (read the job for its status now).
    #[schema(example = "queued")]
    status: &'static str,
}

/// What a validated submission is made of.
struct Submission {
    /// The endpoint's last segment (`prompt`, `chat`, `image`, `video`, `audio`).
    endpoint: &'static str,
    modality: Modality,
    content: String,
    messages: Option<Vec<ChatMessage>>,
    webhook_url: Option<String>,
}

impl Submission {
    /// The fingerprint of everything the job is made from: the endpoint, the content, a chat's
    /// messages (as their canonical JSON, so the spacing and key order of the submitted JSON
    /// do not count but every role and content does) and the webhook URL (normalised, as the
    /// URL check gives it back).
    fn fingerprint(&self) -> Result<RequestFingerprint, ApiError> {
        let messages = self
            .messages
            .as_ref()
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| ApiError::Internal(e.into()))?;
        Ok(RequestFingerprint::of([
            Some(self.endpoint.as_bytes()),
            Some(self.modality.as_str().as_bytes()),
            Some(self.content.as_bytes()),
            messages.as_deref(),
            self.webhook_url.as_deref().map(str::as_bytes),
        ]))
    }
}

/// The `Idempotency-Key` header, if sent: 1 to 255 printable ASCII characters, once.
fn idempotency_key(req: &HttpRequest) -> Result<Option<IdempotencyKey>, ApiError> {
    let mut values = req.headers().get_all(IDEMPOTENCY_KEY);
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(ApiError::InvalidRequest(
            "the Idempotency-Key header must be sent once".to_owned(),
        ));
    }
    IdempotencyKey::parse(value.as_bytes())
        .map(Some)
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))
}

async fn prompt(
    state: web::Data<AppState>,
    principal: Principal,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let key = idempotency_key(&req)?;
    let allow = Allowances {
        large: &["text"],
        ..Allowances::default()
    };
    let mut form = read_form(&req, payload, allow).await?;
    let text = form
        .text("text")?
        .ok_or_else(|| ApiError::InvalidRequest("field \"text\" is required".to_owned()))?;
    if text.is_empty() {
        return Err(ApiError::InvalidRequest(
            "field \"text\" must not be empty".to_owned(),
        ));
    }
    refuse_nul("text", &text)?;
    let webhook_url = webhook_url(&state, &mut form).await?;
    submit(
        &state,
        &principal,
        key,
        Submission {
            endpoint: "prompt",
            modality: Modality::Text,
            content: text,
            messages: None,
            webhook_url,
        },
    )
    .await
}

async fn chat(
    state: web::Data<AppState>,
    principal: Principal,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let key = idempotency_key(&req)?;
    let allow = Allowances {
        repeated: Some(("messages", MAX_CHAT_MESSAGES)),
        ..Allowances::default()
    };
    let mut form = read_form(&req, payload, allow).await?;
    let messages = chat_messages(form.take_all("messages"))?;
    if messages.is_empty() || messages.len() > MAX_CHAT_MESSAGES {
        return Err(ApiError::InvalidRequest(format!(
            "\"messages\" must hold 1 to {MAX_CHAT_MESSAGES} messages"
        )));
    }
    for message in &messages {
        refuse_nul("messages", &message.content)?;
    }
    let content = messages
        .iter()
        .map(|m| format!("{}: {}", m.role.as_str(), m.content))
        .collect::<Vec<_>>()
        .join("\n");
    let webhook_url = webhook_url(&state, &mut form).await?;
    submit(
        &state,
        &principal,
        key,
        Submission {
            endpoint: "chat",
            modality: Modality::Text,
            content,
            messages: Some(messages),
            webhook_url,
        },
    )
    .await
}

async fn media(
    state: web::Data<AppState>,
    principal: Principal,
    modality: web::Data<Modality>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let modality = **modality;
    let field = modality.as_str();
    let key = idempotency_key(&req)?;
    let mut form = read_form(&req, payload, Allowances::default()).await?;
    let part = form
        .take(field)?
        .ok_or_else(|| ApiError::InvalidRequest(format!("field {field:?} is required")))?;
    if part.is_file {
        return Err(ApiError::InvalidRequest(format!(
            "field {field:?} must be the URL of the media, not an upload"
        )));
    }
    let url = String::from_utf8(part.value)
        .map_err(|_| ApiError::InvalidRequest(format!("field {field:?} is not valid UTF-8")))?;
    let checked = state
        .url_guard
        .check(&url, UrlUse::Media)
        .await
        .map_err(|e| url_refused(field, &e))?;
    let webhook_url = webhook_url(&state, &mut form).await?;
    submit(
        &state,
        &principal,
        key,
        Submission {
            endpoint: field,
            modality,
            content: checked.url.to_string(),
            messages: None,
            webhook_url,
        },
    )
    .await
}

/// The chat's messages: one part holding the JSON array, or one part per message (as OpenAPI
/// describes an array in a multipart body, and generated clients send it), each a JSON
/// object. A lone part holding one object is a chat of one message.
fn chat_messages(parts: Vec<Part>) -> Result<Vec<ChatMessage>, ApiError> {
    let shape =
        "a JSON array of {\"role\": \"user\"|\"assistant\"|\"system\", \"content\": string}, \
                 or one such object per part";
    let invalid = |e: serde_json::Error| {
        ApiError::InvalidRequest(format!("\"messages\" must be {shape}: {e}"))
    };
    match parts.as_slice() {
        [] => Err(ApiError::InvalidRequest(
            "field \"messages\" is required".to_owned(),
        )),
        [one] if one.value.trim_ascii_start().starts_with(b"[") => {
            serde_json::from_slice(&one.value).map_err(invalid)
        }
        _ => parts
            .iter()
            .map(|part| serde_json::from_slice(&part.value).map_err(invalid))
            .collect(),
    }
}

/// The optional `webhook_url`: https only, public addresses only.
async fn webhook_url(state: &AppState, form: &mut Form) -> Result<Option<String>, ApiError> {
    let Some(raw) = form.text("webhook_url")? else {
        return Ok(None);
    };
    let checked = state
        .url_guard
        .check(&raw, UrlUse::Webhook)
        .await
        .map_err(|e| url_refused("webhook_url", &e))?;
    Ok(Some(checked.url.to_string()))
}

/// Text with a NUL character, which no text column can hold (and no model needs), is refused.
fn refuse_nul(field: &str, value: &str) -> Result<(), ApiError> {
    if value.contains('\0') {
        return Err(ApiError::InvalidRequest(format!(
            "field {field:?} must not contain NUL characters"
        )));
    }
    Ok(())
}

fn url_refused(field: &str, err: &UrlError) -> ApiError {
    ApiError::InvalidRequest(format!("field {field:?}: {err}"))
}

/// Persists the job, then enqueues it. If the enqueue fails the job still exists (the relay
/// enqueues it once Redis is back), and the client gets 503 with its `job_id`. With a `key`
/// the account already used, nothing is stored: see the module documentation.
async fn submit(
    state: &AppState,
    principal: &Principal,
    key: Option<IdempotencyKey>,
    submission: Submission,
) -> Result<HttpResponse, ApiError> {
    let idempotency = match key {
        Some(key) => Some(Idempotency {
            key,
            fingerprint: submission.fingerprint()?,
        }),
        None => None,
    };
    let id = JobId::new();
    let job = NewJob {
        id,
        account_id: principal.account_id,
        api_key_id: Some(principal.key_id),
        modality: submission.modality,
        content: submission.content,
        messages: submission.messages,
        webhook_url: submission.webhook_url,
        idempotency,
    };
    // Answered before the request deadline, so the 503 can carry the job's id: a job whose
    // write was sent may yet be stored (and is then enqueued by the relay).
    let unavailable = |source: anyhow::Error| ApiError::ServiceUnavailable {
        job_id: Some(id.0),
        source: Some(source),
    };
    let persisted = tokio::time::timeout(state.request_deadline * 3 / 4, state.intake.submit(job))
        .await
        .map_err(|_| unavailable(anyhow::anyhow!("the job was not stored in time")))?
        .map_err(|err| match err {
            // The connection lost under the batch (a failover): its insert may have landed.
            BatchError::Failed(err) if err.is_unavailable() => unavailable(err.into()),
            BatchError::Failed(err) => ApiError::from(err),
            outage @ BatchError::Outage(_) => unavailable(outage.into()),
            stopped @ BatchError::Stopped => ApiError::unavailable(stopped),
        })?;
    let accepted = |job_id| Accepted {
        job_id,
        status: JobStatus::Queued.as_str(),
    };
    match persisted {
        Persisted::Queued => Ok(HttpResponse::Accepted().json(accepted(id))),
        Persisted::Replayed(job_id) => Ok(HttpResponse::Accepted()
            .insert_header((IDEMPOTENT_REPLAYED, "true"))
            .json(accepted(job_id))),
        Persisted::NotQueued => Err(ApiError::ServiceUnavailable {
            job_id: Some(id.0),
            source: None,
        }),
        Persisted::KeyConflict => Err(ApiError::Conflict(
            "this Idempotency-Key was used with a different request in the last 24 hours"
                .to_owned(),
        )),
        Persisted::KeyUnresolved => Err(ApiError::ServiceUnavailable {
            job_id: None,
            source: Some(anyhow::anyhow!(
                "the job holding an Idempotency-Key could not be resolved"
            )),
        }),
    }
}
