//! `ModelServer`: a local HTTP server speaking the OpenAI wire format, standing in for the
//! model server of the `openai` provider. It serves `POST /v1/chat/completions` (JSON) and
//! `POST /v1/audio/transcriptions` (multipart), records every request parsed, and answers
//! from a script the test sets.

use std::{
    collections::VecDeque,
    convert::Infallible,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use http_body_util::{BodyExt, Full};
use hyper::{
    body::{Bytes, Incoming},
    header::HeaderMap,
    server::conn::http1,
    service::service_fn,
    Request, Response, StatusCode,
};
use hyper_util::rt::TokioIo;
use moderation_worker::classify::openai::{OpenAiSettings, ResponseFormat};
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// How the server answers one request.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelReply {
    /// A valid answer to whatever was asked: every boolean of the request's schema false,
    /// every string empty (an empty transcript on the transcription endpoint).
    Pass,
    /// A completion whose content is this JSON value, `finish_reason` `stop`.
    Verdict(Value),
    /// A completion whose content is this text, `finish_reason` `stop`.
    Content(String),
    /// A completion with `message.refusal` set and no content.
    Refusal,
    /// A completion cut short: half an answer, `finish_reason` `length`.
    Length,
    /// 429 with `retry-after` in whole seconds.
    RateLimited {
        /// The `retry-after` value.
        retry_after_secs: u64,
    },
    /// This status with an OpenAI-style error body naming `code`.
    Error {
        /// The status.
        status: u16,
        /// The body's `error.code`.
        code: &'static str,
    },
    /// Waits this long, then answers as [`ModelReply::Pass`].
    Slow(Duration),
    /// A transcription answer `{"text": ...}`.
    Transcript(String),
}

/// One request the server got.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The path, such as `/v1/chat/completions`.
    pub path: String,
    /// Its headers.
    pub headers: HeaderMap,
    /// The body parsed as JSON, for JSON requests.
    pub json: Option<Value>,
    /// The parts of a multipart body.
    pub parts: Vec<FormPart>,
    /// When it arrived.
    pub at: Instant,
}

/// One part of a multipart request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormPart {
    /// The field name.
    pub name: String,
    /// The file name, for a file part.
    pub filename: Option<String>,
    /// The part's `content-type`, if it had one.
    pub content_type: Option<String>,
    /// The part's bytes.
    pub data: Vec<u8>,
}

impl ModelRequest {
    /// The chat request's body; panics for another request.
    pub fn chat(&self) -> &Value {
        assert_eq!(self.path, "/v1/chat/completions", "not a chat request");
        self.json.as_ref().expect("a chat request has a JSON body")
    }

    /// `response_format.type` of a chat request.
    pub fn response_format_type(&self) -> &str {
        self.chat()["response_format"]["type"]
            .as_str()
            .expect("response_format.type")
    }

    /// The JSON schema a chat request asks for, in either response format.
    pub fn schema(&self) -> &Value {
        request_schema(self.chat()).expect("the request carries a schema")
    }

    /// The system prompt of a chat request.
    pub fn system_prompt(&self) -> &str {
        let first = &self.chat()["messages"][0];
        assert_eq!(
            first["role"], "system",
            "the first message is the system prompt"
        );
        first["content"].as_str().expect("system prompt text")
    }

    /// The part of a multipart request named `name`.
    pub fn field(&self, name: &str) -> Option<&FormPart> {
        self.parts.iter().find(|part| part.name == name)
    }
}

#[derive(Default)]
struct Shared {
    received: Vec<ModelRequest>,
    script: VecDeque<ModelReply>,
    fallback: Option<ModelReply>,
    reject_json_schema: bool,
}

/// A running model server double.
pub struct ModelServer {
    /// `http://127.0.0.1:PORT` (the provider adds `/v1`).
    pub base_url: String,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelServer {
    /// Starts a server answering [`ModelReply::Pass`] to everything.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let shared = Arc::new(Mutex::new(Shared {
            fallback: Some(ModelReply::Pass),
            ..Shared::default()
        }));
        let task = tokio::spawn(serve(listener, shared.clone()));
        Self {
            base_url: format!("http://127.0.0.1:{port}"),
            shared,
            task,
        }
    }

    /// Provider settings for this server: every model set, `auto` format, a 2 s timeout and a
    /// 2 ms backoff base.
    pub fn settings(&self) -> OpenAiSettings {
        let mut settings = OpenAiSettings::new(&self.base_url).expect("settings");
        settings.text_model = Some("test-text".to_owned());
        settings.vision_model = Some("test-vision".to_owned());
        settings.transcribe_model = Some("test-whisper".to_owned());
        settings.response_format = ResponseFormat::Auto;
        settings.timeout = Duration::from_secs(2);
        settings.retry_base = Duration::from_millis(2);
        settings
    }

    /// Answers the next requests with `replies` in order, then with `then` for the rest.
    pub fn script(&self, replies: impl IntoIterator<Item = ModelReply>, then: ModelReply) {
        let mut shared = self.shared.lock().expect("lock");
        shared.script = replies.into_iter().collect();
        shared.fallback = Some(then);
    }

    /// Behaves like llama.cpp's Python server: every chat request asking for `json_schema` is
    /// refused with its 422 validation error (the script is not consumed).
    pub fn reject_json_schema(&self) {
        self.shared.lock().expect("lock").reject_json_schema = true;
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.shared.lock().expect("lock").received.clone()
    }
}

async fn serve(listener: TcpListener, shared: Arc<Mutex<Shared>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| handle(req, shared.clone()));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Mutex<Shared>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at = Instant::now();
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let content_type = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let request = ModelRequest {
        path: parts.uri.path().to_owned(),
        json: serde_json::from_slice(&body).ok(),
        parts: multipart_boundary(&content_type)
            .map(|boundary| parse_multipart(&body, &boundary))
            .unwrap_or_default(),
        headers: parts.headers,
        at,
    };
    let path = request.path.clone();
    let chat = request.json.clone().unwrap_or(Value::Null);
    let reply = {
        let mut shared = shared.lock().expect("lock");
        let asks_json_schema = chat["response_format"]["type"] == "json_schema";
        let rejected = shared.reject_json_schema && asks_json_schema;
        shared.received.push(request);
        if rejected {
            return Ok(llama_cpp_format_rejection());
        }
        let fallback = shared.fallback.clone().unwrap_or(ModelReply::Pass);
        shared.script.pop_front().unwrap_or(fallback)
    };
    Ok(match path.as_str() {
        "/v1/chat/completions" => chat_reply(reply, &chat).await,
        "/v1/audio/transcriptions" => transcription_reply(reply).await,
        _ => json_response(404, &json!({ "error": { "message": "not found" } })),
    })
}

async fn chat_reply(reply: ModelReply, request: &Value) -> Response<Full<Bytes>> {
    match reply {
        ModelReply::Pass => completion(&pass(request_schema(request)).to_string(), "stop"),
        ModelReply::Slow(delay) => {
            tokio::time::sleep(delay).await;
            completion(&pass(request_schema(request)).to_string(), "stop")
        }
        ModelReply::Verdict(value) => completion(&value.to_string(), "stop"),
        ModelReply::Content(text) | ModelReply::Transcript(text) => completion(&text, "stop"),
        ModelReply::Refusal => json_response(
            200,
            &json!({
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "choices": [{
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": null,
                        "refusal": "I'm sorry, I can't help with that.",
                    },
                    "finish_reason": "stop",
                }],
            }),
        ),
        ModelReply::Length => completion("{\"reason\": \"The cont", "length"),
        other => failure(other),
    }
}

async fn transcription_reply(reply: ModelReply) -> Response<Full<Bytes>> {
    match reply {
        ModelReply::Pass => json_response(200, &json!({ "text": "" })),
        ModelReply::Slow(delay) => {
            tokio::time::sleep(delay).await;
            json_response(200, &json!({ "text": "" }))
        }
        ModelReply::Transcript(text) | ModelReply::Content(text) => {
            json_response(200, &json!({ "text": text }))
        }
        ModelReply::Verdict(value) => json_response(200, &value),
        ModelReply::Refusal | ModelReply::Length => {
            json_response(200, &json!({ "unexpected": true }))
        }
        other => failure(other),
    }
}

fn failure(reply: ModelReply) -> Response<Full<Bytes>> {
    match reply {
        ModelReply::RateLimited { retry_after_secs } => {
            let mut response = json_response(
                429,
                &json!({ "error": {
                    "message": "Rate limit reached",
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                } }),
            );
            response.headers_mut().insert(
                "retry-after",
                retry_after_secs.to_string().parse().expect("header"),
            );
            response
        }
        ModelReply::Error { status, code } => json_response(
            status,
            &json!({ "error": {
                "message": format!("Scripted failure {status}"),
                "type": "invalid_request_error",
                "code": code,
            } }),
        ),
        other => panic!("{other:?} is not a failure"),
    }
}

/// What llama.cpp's Python server (llama-cpp-python 0.3) answers to `response_format:
/// json_schema`: a 500 whose message is the request validation error.
fn llama_cpp_format_rejection() -> Response<Full<Bytes>> {
    json_response(
        500,
        &json!({ "error": {
            "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', \
                        'response_format', 'type'), 'msg': \"Input should be 'text' or \
                        'json_object'\", 'input': 'json_schema'}",
            "type": "internal_server_error",
            "param": null,
            "code": null,
        } }),
    )
}

fn completion(content: &str, finish_reason: &str) -> Response<Full<Bytes>> {
    json_response(
        200,
        &json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": "test",
            "choices": [{
                "index": 0,
                "message": { "role": "assistant", "content": content, "refusal": null },
                "finish_reason": finish_reason,
            }],
            "usage": { "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 },
        }),
    )
}

fn json_response(status: u16, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = StatusCode::from_u16(status).expect("status");
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().expect("header"));
    response
}

/// The schema of a chat request: `response_format.json_schema.schema` or
/// `response_format.schema`.
fn request_schema(request: &Value) -> Option<&Value> {
    let format = &request["response_format"];
    [&format["json_schema"]["schema"], &format["schema"]]
        .into_iter()
        .find(|schema| schema.is_object())
}

/// A value matching `schema` with every boolean false and every string empty.
fn pass(schema: Option<&Value>) -> Value {
    let Some(schema) = schema else {
        return json!({});
    };
    match schema["type"].as_str() {
        Some("boolean") => Value::Bool(false),
        Some("string") => Value::String(String::new()),
        Some("object") => Value::Object(
            schema["properties"]
                .as_object()
                .map(|properties| {
                    properties
                        .iter()
                        .map(|(name, property)| (name.clone(), pass(Some(property))))
                        .collect()
                })
                .unwrap_or_default(),
        ),
        _ => Value::Null,
    }
}

fn multipart_boundary(content_type: &str) -> Option<String> {
    if !content_type.starts_with("multipart/form-data") {
        return None;
    }
    content_type.split(';').find_map(|param| {
        param
            .trim()
            .strip_prefix("boundary=")
            .map(|b| b.trim_matches('"').to_owned())
    })
}

/// Splits a `multipart/form-data` body into its parts.
fn parse_multipart(body: &[u8], boundary: &str) -> Vec<FormPart> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parts = Vec::new();
    let mut rest = body;
    while let Some(start) = find(rest, &delimiter) {
        rest = &rest[start + delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        rest = rest.strip_prefix(b"\r\n").unwrap_or(rest);
        let Some(end) = find(rest, &delimiter) else {
            break;
        };
        let raw = &rest[..end];
        let raw = raw.strip_suffix(b"\r\n").unwrap_or(raw);
        if let Some(part) = parse_part(raw) {
            parts.push(part);
        }
        rest = &rest[end..];
    }
    parts
}

fn parse_part(raw: &[u8]) -> Option<FormPart> {
    let split = find(raw, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let data = raw[split + 4..].to_vec();
    let mut part = FormPart {
        name: String::new(),
        filename: None,
        content_type: None,
        data,
    };
    for line in head.split("\r\n") {
        let (header, value) = line.split_once(':')?;
        match header.trim().to_ascii_lowercase().as_str() {
            "content-disposition" => {
                for param in value.split(';').map(str::trim) {
                    if let Some(name) = param.strip_prefix("name=") {
                        part.name = name.trim_matches('"').to_owned();
                    } else if let Some(filename) = param.strip_prefix("filename=") {
                        part.filename = Some(filename.trim_matches('"').to_owned());
                    }
                }
            }
            "content-type" => part.content_type = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    Some(part)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
