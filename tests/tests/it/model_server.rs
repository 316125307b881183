//! The end-to-end tier against a real OpenAI-compatible server: llama-cpp-python serving
//! SmolLM2-135M-Instruct (see `tests/src/model_server.rs`). `scripts/test` installs the server
//! and runs these with `--ignored`; a 135M model judges poorly, so they assert the plumbing
//! (a verdict parsed from real output, retries, failures), not the model's judgement.

use std::time::Duration;

use moderation_shared::domain::Modality;
use moderation_tests::{
    eventually, forms::text_form, model_server::LlamaServer, worker::spawn_worker, TestApp, TestKey,
};
use moderation_worker::{classify::openai::OpenAiSettings, ClassifierSettings};
use serde_json::{json, Value};
use uuid::Uuid;

fn openai(server: &LlamaServer, adjust: impl FnOnce(&mut OpenAiSettings)) -> ClassifierSettings {
    let mut settings = OpenAiSettings::new(&server.base_url).unwrap();
    settings.text_model = Some("smollm2".to_owned());
    settings.timeout = Duration::from_secs(60);
    settings.retry_base = Duration::from_millis(100);
    settings.max_tokens = Some(120);
    adjust(&mut settings);
    ClassifierSettings::OpenAi(Box::new(settings))
}

async fn fleet(
    classifier: ClassifierSettings,
) -> (TestApp, TestKey, moderation_tests::worker::TestWorker) {
    let app = moderation_tests::spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let worker = spawn_worker(&app, |s| {
        s.modalities = vec![Modality::Text];
        s.classifier = classifier;
    })
    .await;
    (app, key, worker)
}

async fn finished(app: &TestApp, key: &TestKey, job: Uuid) -> Value {
    eventually(Duration::from_secs(240), "the job to finish", || async {
        let body: Value = app
            .get(&format!("/api/v1/job/{job}"), key)
            .await
            .json()
            .await
            .ok()?;
        matches!(body["status"].as_str(), Some("completed" | "failed")).then_some(body)
    })
    .await
}

async fn job_id(response: reqwest::Response) -> Uuid {
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    body["job_id"].as_str().unwrap().parse().unwrap()
}

/// Whether `reason` repeats 5 or more consecutive words of `text` (case and punctuation aside).
fn quotes_five_words(reason: &str, text: &str) -> bool {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (reason, text) = (words(reason), words(text));
    text.windows(5)
        .any(|run| reason.windows(5).any(|r| r == run))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real model server: scripts/test runs this tier"]
async fn prompt_and_chat_jobs_complete_with_a_verdict_from_the_real_model() {
    let server = LlamaServer::start().await;
    let (app, key, _worker) = fleet(openai(&server, |_| {})).await;
    let prompt = "I am going to hurt you badly tomorrow after class, watch your back.";
    let chat = json!([
        {"role": "user", "content": "What should I cook for dinner tonight with rice and beans?"},
        {"role": "assistant", "content": "A simple rice and bean chili with cumin works well."}
    ]);

    let prompt_job = job_id(app.submit("prompt", &key, text_form("text", prompt)).await).await;
    let chat_job = job_id(
        app.submit("chat", &key, text_form("messages", chat.to_string()))
            .await,
    )
    .await;
    let prompt_body = finished(&app, &key, prompt_job).await;
    let chat_body = finished(&app, &key, chat_job).await;

    for (body, text) in [
        (&prompt_body, prompt.to_owned()),
        (&chat_body, chat.to_string()),
    ] {
        assert_eq!(body["status"], "completed", "{body}");
        assert!(body["is_prohibited"].is_boolean(), "{body}");
        if let Some(reason) = body["reason"].as_str() {
            assert!(
                !quotes_five_words(reason, &text),
                "reason quotes the input: {reason}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real model server: scripts/test runs this tier"]
async fn an_answer_cut_short_is_retried_and_then_fails_the_job_never_passes_it() {
    let server = LlamaServer::start().await;
    let (app, key, _worker) = fleet(openai(&server, |s| s.max_tokens = Some(2))).await;

    let job = job_id(
        app.submit("prompt", &key, text_form("text", "Is this fine?"))
            .await,
    )
    .await;
    let body = finished(&app, &key, job).await;

    assert_eq!(body["status"], "failed", "{body}");
    assert_eq!(body["error"]["code"], "CLASSIFIER_UNAVAILABLE");
    assert!(body["is_prohibited"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real model server: scripts/test runs this tier"]
async fn a_stopped_server_fails_jobs_as_unavailable_and_a_restarted_one_completes_new_jobs() {
    let mut server = LlamaServer::start().await;
    let (app, key, _worker) = fleet(openai(&server, |_| {})).await;

    server.stop();
    let during = job_id(
        app.submit("prompt", &key, text_form("text", "Hello there"))
            .await,
    )
    .await;
    let failed = finished(&app, &key, during).await;
    server.restart().await;
    let after = job_id(
        app.submit("prompt", &key, text_form("text", "Hello again"))
            .await,
    )
    .await;
    let completed = finished(&app, &key, after).await;

    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], "CLASSIFIER_UNAVAILABLE");
    assert_eq!(completed["status"], "completed", "{completed}");
}
