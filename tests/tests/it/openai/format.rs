//! The response format: `auto` falls back from `json_schema` to `json_object` once and
//! remembers it; a fixed format never falls back.

use moderation_tests::openai::{ModelReply, ModelServer};
use moderation_worker::classify::{
    openai::{ProviderError, ResponseFormat, VisualKind},
    Policy,
};

use super::{media, policy, prompt, provider, provider_with, required, PNG};

#[tokio::test]
async fn auto_format_falls_back_to_json_object_once_and_remembers_it() {
    // Arrange
    let server = ModelServer::start().await;
    server.reject_json_schema();
    let provider = provider(&server);
    let policy = policy(false, &[("gambling", "Betting.")]);

    // Act
    let first = provider.check_text(prompt("one"), &policy).await;
    let second = provider
        .check_visual(VisualKind::Image, &media(PNG, None), &policy)
        .await;

    // Assert
    assert!(first.is_ok(), "{first:?}");
    assert!(second.is_ok(), "{second:?}");
    let requests = server.requests();
    let formats: Vec<&str> = requests.iter().map(|r| r.response_format_type()).collect();
    assert_eq!(formats, ["json_schema", "json_object", "json_object"]);
    let schema = &requests[1].chat()["response_format"]["schema"];
    assert_eq!(required(schema), ["reason", "prohibited", "custom"]);
}

#[tokio::test]
async fn fixed_json_schema_does_not_fall_back() {
    // Arrange
    let server = ModelServer::start().await;
    server.reject_json_schema();
    let provider = provider_with(&server, |s| s.response_format = ResponseFormat::JsonSchema);

    // Act
    let err = provider
        .check_text(prompt("hello"), &Policy::default())
        .await
        .unwrap_err();

    // Assert
    assert!(
        matches!(err, ProviderError::Rejected { status: 500, .. }),
        "{err:?}"
    );
    assert_eq!(err.code().as_str(), "CLASSIFIER_UNAVAILABLE");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn fixed_json_object_sends_the_schema_without_trying_json_schema() {
    // Arrange
    let server = ModelServer::start().await;
    let provider = provider_with(&server, |s| s.response_format = ResponseFormat::JsonObject);

    // Act
    provider
        .check_text(prompt("hello"), &Policy::default())
        .await
        .unwrap();

    // Assert
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].response_format_type(), "json_object");
    assert_eq!(
        required(&requests[0].chat()["response_format"]["schema"]),
        ["reason", "prohibited"]
    );
}

#[tokio::test]
async fn a_bad_request_not_about_the_format_is_rejected_at_once_and_keeps_json_schema() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::Error {
            status: 400,
            code: "model_not_found",
        }],
        ModelReply::Pass,
    );
    let provider = provider(&server);

    // Act
    let first = provider
        .check_text(prompt("hello"), &Policy::default())
        .await;
    let second = provider
        .check_text(prompt("hello"), &Policy::default())
        .await;

    // Assert
    assert!(
        matches!(first, Err(ProviderError::Rejected { status: 400, .. })),
        "{first:?}"
    );
    assert!(second.is_ok(), "{second:?}");
    let formats: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.response_format_type().to_owned())
        .collect();
    assert_eq!(formats, ["json_schema", "json_schema"]);
}
