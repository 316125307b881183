//! What the settings change in requests: the API key, `max_tokens`, and a missing model.

use moderation_tests::openai::ModelServer;
use moderation_worker::classify::{
    openai::{ProviderError, VisualKind},
    Policy,
};

use super::{media, prompt, provider, provider_with, MP3, MP4};

#[tokio::test]
async fn the_api_key_goes_as_a_bearer_token_and_no_header_goes_without_one() {
    // Arrange
    let server = ModelServer::start().await;
    let keyed = provider_with(&server, |s| {
        s.api_key = Some(moderation_shared::config::Secret::new("sk-test".to_owned()));
    });
    let keyless = provider(&server);

    // Act
    keyed
        .check_text(prompt("a"), &Policy::default())
        .await
        .unwrap();
    keyless.transcribe(&media(MP3, None)).await.unwrap();

    // Assert
    let requests = server.requests();
    assert_eq!(requests[0].headers["authorization"], "Bearer sk-test");
    assert!(requests[1].headers.get("authorization").is_none());
}

#[tokio::test]
async fn max_tokens_is_sent_only_when_set() {
    // Arrange
    let server = ModelServer::start().await;
    let limited = provider_with(&server, |s| s.max_tokens = Some(256));
    let unlimited = provider(&server);

    // Act
    limited
        .check_text(prompt("a"), &Policy::default())
        .await
        .unwrap();
    unlimited
        .check_text(prompt("a"), &Policy::default())
        .await
        .unwrap();

    // Assert
    let requests = server.requests();
    assert_eq!(requests[0].chat()["max_tokens"], 256);
    assert!(requests[1].chat().get("max_tokens").is_none());
}

#[tokio::test]
async fn a_missing_model_fails_without_a_request() {
    // Arrange
    let server = ModelServer::start().await;
    let provider = provider_with(&server, |s| s.vision_model = None);

    // Act
    let err = provider
        .check_visual(VisualKind::Video, &media(MP4, None), &Policy::default())
        .await
        .unwrap_err();

    // Assert
    assert!(
        matches!(err, ProviderError::NoModel("APP_VISION_MODEL")),
        "{err:?}"
    );
    assert!(server.requests().is_empty());
}
