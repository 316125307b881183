//! The five submission operations, written by hand rather than by `#[utoipa::path]`: their
//! bodies are multipart forms read by hand and three of them share one handler.

use moderation_shared::domain::MAX_IDEMPOTENCY_KEY_LEN;
use utoipa::openapi::{
    encoding::EncodingBuilder,
    header::HeaderBuilder,
    path::{HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn},
    request_body::RequestBodyBuilder,
    schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, Schema, SchemaFormat, Type},
    ContentBuilder, OpenApi, Ref, Required, Response, ResponseBuilder,
};

use super::responses::error;
use crate::routes::submissions::{IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, MAX_CHAT_MESSAGES};

/// The optional `Idempotency-Key` request header.
fn idempotency_key() -> Parameter {
    ParameterBuilder::new()
        .name(IDEMPOTENCY_KEY)
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(format!(
            "1 to {MAX_IDEMPOTENCY_KEY_LEN} printable ASCII characters (else 400). Within 24 \
             hours, the same key with the same request from the same account answers the same \
             `job_id` (202, with `{IDEMPOTENT_REPLAYED}: true`) and creates nothing; the same \
             key with another request (another endpoint or any field changed) is 409 \
             `CONFLICT`. Concurrent requests with one key create one job."
        )))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(MAX_IDEMPOTENCY_KEY_LEN))
                // Printable ASCII; HTTP drops spaces around a header value, so a key that
                // should arrive whole neither starts nor ends with one.
                .pattern(Some("^[!-~]([ -~]*[!-~])?$")),
        ))
        .build()
}

/// The 202: the new job, or on a replay the job the key first created.
fn accepted() -> Response {
    ResponseBuilder::new()
        .description(
            "Persisted and queued; or, for a repeated `Idempotency-Key` with the same request, \
             the answer of the first submission again (its `job_id`, whatever the job's \
             status now), marked by the `idempotent-replayed` header.",
        )
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Accepted")))
                .build(),
        )
        .header(
            IDEMPOTENT_REPLAYED,
            HeaderBuilder::new()
                .schema(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some(["true"])),
                )
                .description(Some(
                    "`true` when this answer replays an earlier submission with the same \
                     `Idempotency-Key`; absent on a first submission.",
                ))
                .build(),
        )
        .build()
}

/// Adds the five submission operations to `doc`.
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
                    "The messages: one part per message, each a JSON object (how a multipart \
                     array is sent; each part up to 16,384 bytes as an ordinary field, 256 KiB \
                     together, the parts counting as one field), or the whole JSON array in one \
                     part, sent as an ordinary field (up to 16,384 bytes) or a file part (up to \
                     256 KiB).",
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
            .parameter(idempotency_key())
            .response("202", accepted())
            .response(
                "400",
                error(
                    "A field is missing, malformed or not allowed, or the `Idempotency-Key` \
                     header is malformed.",
                ),
            )
            .response(
                "413",
                error("The body, a field or the field count is over its limit."),
            )
            .response(
                "409",
                error(
                    "The `Idempotency-Key` came with another request within 24 hours (`CONFLICT`).",
                ),
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
