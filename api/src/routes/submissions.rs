//! The five submission endpoints: validate, persist, enqueue, answer 202.

use actix_web::{web, HttpRequest, HttpResponse};
use moderation_shared::{
    batch::BatchError,
    db::jobs::NewJob,
    domain::{ChatMessage, JobId, JobStatus, Modality},
    url_guard::{UrlError, UrlUse},
};
use serde::Serialize;
use utoipa::{
    openapi::{
        encoding::EncodingBuilder,
        path::{HttpMethod, OperationBuilder},
        request_body::RequestBodyBuilder,
        schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, SchemaFormat, Type},
        ContentBuilder, OpenApi, Ref, Required, ResponseBuilder,
    },
    ToSchema,
};

use crate::{
    auth::Principal,
    error::ApiError,
    intake::Persisted,
    multipart::{read_form, Form},
    openapi::error,
    startup::resource,
    state::AppState,
};

/// The most messages a chat may have.
pub const MAX_CHAT_MESSAGES: usize = 500;

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
    /// The new job.
    #[schema(value_type = uuid::Uuid)]
    job_id: JobId,
    /// Always `queued`.
    #[schema(example = "queued")]
    status: &'static str,
}

/// Adds the five submission operations to `doc`. They are written here rather than by
/// `#[utoipa::path]` because their bodies are multipart forms read by hand and three of them
/// share one handler.
pub fn document(doc: &mut OpenApi) {
    let url_field = |description: &str| -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::Custom("uri".to_owned())))
            .description(Some(description))
            .into()
    };
    let message = ObjectBuilder::new()
        .property(
            "role",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["user", "assistant", "system"])),
        )
        .required("role")
        .property("content", ObjectBuilder::new().schema_type(Type::String))
        .required("content")
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    let forms = [
        (
            "prompt",
            "text",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .description(Some(
                    "The text to classify: 1 byte to 256 KiB of UTF-8 (over that, 413).",
                ))
                .into(),
            "Submits a text prompt.",
        ),
        (
            "chat",
            "messages",
            ArrayBuilder::new()
                .items(message)
                .min_items(Some(1))
                .max_items(Some(MAX_CHAT_MESSAGES))
                .description(Some(
                    "A JSON array of messages, sent as an ordinary field (up to 16,384 bytes) or \
                     a file part (up to 256 KiB).",
                ))
                .into(),
            "Submits a chat; it is classified as text.",
        ),
        (
            "image",
            "image",
            url_field(
                "An http or https URL of the image; it must resolve to public addresses only.",
            ),
            "Submits an image by URL; a worker fetches it.",
        ),
        (
            "video",
            "video",
            url_field(
                "An http or https URL of the video; it must resolve to public addresses only.",
            ),
            "Submits a video by URL; a worker fetches it.",
        ),
        (
            "audio",
            "audio",
            url_field(
                "An http or https URL of the audio (at most 30 minutes); it must resolve to \
                       public addresses only.",
            ),
            "Submits audio by URL; a worker fetches, probes and transcribes it.",
        ),
    ];
    for (name, field, schema, summary) in forms {
        let form = ObjectBuilder::new()
            .property(field, schema)
            .required(field)
            .property(
                "webhook_url",
                url_field(
                    "Where the result is sent (https, public addresses only); else the \
                           account's global webhook URL.",
                ),
            )
            .description(Some(
                "At most 8 non-file fields; a field other than `text` may hold 16,384 bytes. \
                 Unknown fields are ignored but count toward the 8.",
            ));
        let mut content = ContentBuilder::new().schema(Some(form));
        if field == "messages" {
            let json = EncodingBuilder::default().content_type(Some("application/json"));
            content = content.encoding(field, json.build());
        }
        let operation = OperationBuilder::new()
            .tag("submissions")
            .operation_id(Some(format!("moderate_{name}")))
            .summary(Some(summary))
            .request_body(Some(
                RequestBodyBuilder::new()
                    .content("multipart/form-data", content.build())
                    .required(Some(Required::True))
                    .build(),
            ))
            .response(
                "202",
                ResponseBuilder::new()
                    .description("Persisted and queued.")
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("Accepted")))
                            .build(),
                    )
                    .build(),
            )
            .response(
                "400",
                error("A field is missing, malformed or not allowed."),
            )
            .response(
                "413",
                error("The body, a field or the field count is over its limit."),
            )
            .response("415", error("The body is not `multipart/form-data`."))
            .build();
        doc.paths.add_path_operation(
            format!("/api/v1/moderate/{name}"),
            vec![HttpMethod::Post],
            operation,
        );
    }
}

/// What a validated submission is made of.
struct Submission {
    modality: Modality,
    content: String,
    messages: Option<Vec<ChatMessage>>,
    webhook_url: Option<String>,
}

async fn prompt(
    state: web::Data<AppState>,
    principal: Principal,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let mut form = read_form(&req, payload, &["text"]).await?;
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
        Submission {
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
    let mut form = read_form(&req, payload, &[]).await?;
    let raw = form
        .take("messages")?
        .ok_or_else(|| ApiError::InvalidRequest("field \"messages\" is required".to_owned()))?;
    let messages: Vec<ChatMessage> = serde_json::from_slice(&raw.value).map_err(|e| {
        ApiError::InvalidRequest(format!(
            "\"messages\" must be a JSON array of {{\"role\": \"user\"|\"assistant\"|\"system\", \"content\": string}}: {e}"
        ))
    })?;
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
        Submission {
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
    let mut form = read_form(&req, payload, &[]).await?;
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
        Submission {
            modality,
            content: checked.url.to_string(),
            messages: None,
            webhook_url,
        },
    )
    .await
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
/// enqueues it once Redis is back), and the client gets 503 with its `job_id`.
async fn submit(
    state: &AppState,
    principal: &Principal,
    submission: Submission,
) -> Result<HttpResponse, ApiError> {
    let id = JobId::new();
    let persisted = state
        .intake
        .submit(NewJob {
            id,
            account_id: principal.account_id,
            api_key_id: Some(principal.key_id),
            modality: submission.modality,
            content: submission.content,
            messages: submission.messages,
            webhook_url: submission.webhook_url,
        })
        .await
        .map_err(|err| match err {
            BatchError::Failed(err) => ApiError::from(err),
            stopped @ BatchError::Stopped => ApiError::unavailable(stopped),
        })?;
    match persisted {
        Persisted::Queued => Ok(HttpResponse::Accepted().json(Accepted {
            job_id: id,
            status: JobStatus::Queued.as_str(),
        })),
        Persisted::NotQueued => Err(ApiError::ServiceUnavailable {
            job_id: Some(id.0),
            source: None,
        }),
    }
}
