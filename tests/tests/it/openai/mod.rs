//! The `openai` provider against `ModelServer`, a double speaking the OpenAI wire format:
//! what is sent (schemas, prompts, data URLs, multipart uploads) and how answers, failures
//! and the response-format fallback are handled.

mod failures;
mod format;
mod media;
mod settings;
mod text;

use moderation_tests::openai::{ModelRequest, ModelServer};
use moderation_worker::classify::{
    openai::{OpenAiProvider, OpenAiSettings, Problem, ProviderError, MODEL_CALL_MAX_TRIES},
    CustomCategory, Media, Policy, TextContent,
};
use serde_json::Value;

const PNG: &[u8] = b"\x89PNG\r\n\x1A\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01";

const MP4: &[u8] = b"\0\0\0\x18ftypisom\0\0\x02\0isomiso2mp41";

const MP3: &[u8] = b"ID3\x04\0\0\0\0\0\0\xFF\xFB\x90\x64";

fn provider(server: &ModelServer) -> OpenAiProvider {
    provider_with(server, |_| {})
}

fn provider_with(server: &ModelServer, adjust: impl FnOnce(&mut OpenAiSettings)) -> OpenAiProvider {
    moderation_tests::init_tracing();
    let mut settings = server.settings();
    adjust(&mut settings);
    OpenAiProvider::new(settings).expect("provider")
}

fn policy(nsfw_check: bool, custom: &[(&str, &str)]) -> Policy {
    Policy {
        nsfw_check,
        custom: custom
            .iter()
            .map(|(name, description)| CustomCategory {
                name: (*name).to_owned(),
                description: (*description).to_owned(),
                keywords: vec![],
            })
            .collect(),
        account_terms: vec![],
    }
}

fn prompt(text: &str) -> TextContent<'_> {
    TextContent {
        text,
        messages: None,
    }
}

fn media(bytes: &[u8], content_type: Option<&str>) -> Media {
    Media {
        bytes: bytes.to_vec().into(),
        content_type: content_type.map(str::to_owned),
    }
}

/// The one content part of the user message with `type` `kind`.
fn content_part<'a>(request: &'a ModelRequest, kind: &str) -> &'a Value {
    let user = &request.chat()["messages"][1];
    assert_eq!(user["role"], "user");
    user["content"]
        .as_array()
        .expect("content parts")
        .iter()
        .find(|part| part["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} part"))
}

fn required(schema: &Value) -> Vec<&str> {
    schema["required"]
        .as_array()
        .expect("required")
        .iter()
        .map(|name| name.as_str().expect("name"))
        .collect()
}

fn assert_unavailable_after_every_try(err: &ProviderError, last: &Problem) {
    match err {
        ProviderError::Unavailable { tries, last: got } => {
            assert_eq!(*tries, MODEL_CALL_MAX_TRIES);
            assert_eq!(got, last);
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(err.code().as_str(), "CLASSIFIER_UNAVAILABLE");
}
