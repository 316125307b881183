//! Failures: what is retried (refusals, cut or invalid answers, server errors, 429s, slow
//! replies), how long between tries, and what makes the provider unavailable or is rejected
//! at once.

use std::time::{Duration, Instant};

use moderation_tests::openai::{ModelReply, ModelServer};
use moderation_worker::classify::{
    openai::{OpenAiProvider, OpenAiSettings, Problem, ProviderError, MODEL_CALL_MAX_TRIES},
    Policy,
};
use serde_json::json;

use super::{
    assert_unavailable_after_every_try, media, policy, prompt, provider, provider_with, MP3,
};

async fn retried_until_unavailable(reply: ModelReply, last: Problem) {
    // Arrange
    let server = ModelServer::start().await;
    server.script([], reply);
    let provider = provider(&server);

    // Act
    let err = provider
        .check_text(prompt("hello"), &Policy::default())
        .await
        .unwrap_err();

    // Assert
    assert_unavailable_after_every_try(&err, &last);
    assert_eq!(server.requests().len(), MODEL_CALL_MAX_TRIES as usize);
}

#[tokio::test]
async fn refusals_are_retried_and_never_pass() {
    retried_until_unavailable(ModelReply::Refusal, Problem::Refusal).await;
}

#[tokio::test]
async fn answers_cut_at_the_length_limit_are_retried_and_never_pass() {
    retried_until_unavailable(ModelReply::Length, Problem::Truncated).await;
}

#[tokio::test]
async fn garbage_answers_are_retried_and_never_pass() {
    retried_until_unavailable(
        ModelReply::Content("I think this is fine!".to_owned()),
        Problem::Invalid("the answer is not JSON".to_owned()),
    )
    .await;
}

#[tokio::test]
async fn server_errors_on_every_try_make_the_provider_unavailable() {
    retried_until_unavailable(
        ModelReply::Error {
            status: 503,
            code: "overloaded",
        },
        Problem::Status(503),
    )
    .await;
}

#[tokio::test]
async fn an_answer_missing_a_custom_category_is_retried_not_passed() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::Verdict(
            json!({ "reason": "", "prohibited": false }),
        )],
        ModelReply::Verdict(json!({
            "reason": "Betting.",
            "prohibited": true,
            "custom": { "gambling": true },
        })),
    );
    let provider = provider(&server);

    // Act
    let verdict = provider
        .check_text(prompt("bet"), &policy(false, &[("gambling", "Betting.")]))
        .await
        .unwrap();

    // Assert
    assert_eq!(server.requests().len(), 2);
    assert!(verdict.prohibited);
    assert!(verdict.custom["gambling"]);
}

#[tokio::test]
async fn an_answer_on_the_last_try_is_used() {
    // Arrange
    let server = ModelServer::start().await;
    let failures = (1..MODEL_CALL_MAX_TRIES).map(|_| ModelReply::Refusal);
    server.script(failures, ModelReply::Pass);
    let provider = provider(&server);

    // Act
    let verdict = provider
        .check_text(prompt("hello"), &Policy::default())
        .await
        .unwrap();

    // Assert
    assert_eq!(server.requests().len(), MODEL_CALL_MAX_TRIES as usize);
    assert!(!verdict.prohibited);
}

#[tokio::test]
async fn server_errors_are_retried_with_growing_waits_until_the_server_recovers() {
    // Arrange
    let server = ModelServer::start().await;
    let error = |status| ModelReply::Error {
        status,
        code: "server_error",
    };
    server.script([error(500), error(502), error(503)], ModelReply::Pass);
    let provider = provider_with(&server, |s| s.retry_base = Duration::from_millis(40));

    // Act
    let verdict = provider
        .check_text(prompt("hello"), &Policy::default())
        .await;

    // Assert
    assert!(verdict.is_ok(), "{verdict:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    // Waits of 40, 80 and 160 ms, each less at most half by jitter.
    for (i, least) in [20u64, 40, 80].into_iter().enumerate() {
        let gap = requests[i + 1].at - requests[i].at;
        assert!(gap >= Duration::from_millis(least), "wait {i} was {gap:?}");
    }
}

#[tokio::test]
async fn a_429_waits_for_retry_after_then_recovers() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::RateLimited {
            retry_after_secs: 1,
        }],
        ModelReply::Pass,
    );
    let provider = provider(&server);
    let started = Instant::now();

    // Act
    let verdict = provider
        .check_text(prompt("hello"), &Policy::default())
        .await;

    // Assert
    assert!(verdict.is_ok(), "{verdict:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].at - requests[0].at >= Duration::from_secs(1));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_reply_slower_than_the_timeout_is_retried_then_recovers() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::Slow(Duration::from_millis(1500))],
        ModelReply::Pass,
    );
    let provider = provider_with(&server, |s| s.timeout = Duration::from_millis(300));
    let started = Instant::now();

    // Act
    let verdict = provider
        .check_text(prompt("hello"), &Policy::default())
        .await;

    // Assert
    assert!(verdict.is_ok(), "{verdict:?}");
    assert_eq!(server.requests().len(), 2);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the slow reply was not awaited"
    );
}

#[tokio::test]
async fn a_slow_reply_on_every_try_makes_the_provider_unavailable() {
    // Arrange
    let server = ModelServer::start().await;
    server.script([], ModelReply::Slow(Duration::from_millis(500)));
    let provider = provider_with(&server, |s| s.timeout = Duration::from_millis(100));

    // Act
    let err = provider
        .check_text(prompt("hello"), &Policy::default())
        .await
        .unwrap_err();

    // Assert
    assert_unavailable_after_every_try(&err, &Problem::Timeout);
}

#[tokio::test]
async fn an_unreachable_server_makes_the_provider_unavailable() {
    // Arrange
    moderation_tests::init_tracing();
    let mut settings = OpenAiSettings::new(&format!(
        "http://127.0.0.1:{}",
        moderation_tests::unused_port()
    ))
    .unwrap();
    settings.text_model = Some("m".to_owned());
    settings.retry_base = Duration::from_millis(1);
    let provider = OpenAiProvider::new(settings).unwrap();

    // Act
    let err = provider
        .check_text(prompt("hello"), &Policy::default())
        .await
        .unwrap_err();

    // Assert
    assert_unavailable_after_every_try(&err, &Problem::Connection);
}

#[tokio::test]
async fn transcription_failures_are_retried_like_chat() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [
            ModelReply::Error {
                status: 500,
                code: "server_error",
            },
            ModelReply::Refusal,
        ],
        ModelReply::Transcript("hello".to_owned()),
    );
    let provider = provider(&server);

    // Act
    let transcript = provider.transcribe(&media(MP3, Some("audio/mpeg"))).await;

    // Assert
    assert_eq!(transcript.unwrap(), "hello");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn an_unauthorised_request_is_rejected_at_once() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [],
        ModelReply::Error {
            status: 401,
            code: "invalid_api_key",
        },
    );
    let provider = provider(&server);

    // Act
    let err = provider
        .check_text(prompt("hello"), &Policy::default())
        .await
        .unwrap_err();

    // Assert
    match &err {
        ProviderError::Rejected { status, code } => {
            assert_eq!(*status, 401);
            assert_eq!(code.as_deref(), Some("invalid_api_key"));
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}
