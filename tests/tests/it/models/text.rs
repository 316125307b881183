//! The built-in text model end to end: prompts and chats submitted through the api, judged by
//! an in-process text worker with the real models (`TEST_MODEL_DIR`), read back through the
//! api. Ignored: run with
//! `TEST_MODEL_DIR=DIR cargo test -p moderation-tests --test it -- models::text --ignored`.

use std::process::Command;

use moderation_shared::domain::Modality;
use moderation_tests::{
    eventually,
    forms::text_form,
    spawn_app, unused_port,
    worker::{model_dir, spawn_worker, TestWorker},
    TestApp, TestKey,
};
use reqwest::Method;
use serde_json::{json, Value};

pub(super) async fn model_fleet() -> (TestApp, TestKey, TestWorker) {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let dir = model_dir();
    let worker = spawn_worker(&app, |s| {
        s.modalities = vec![Modality::Text];
        s.models.dir = dir;
        s.models.required = true;
    })
    .await;
    (app, key, worker)
}

pub(super) async fn judge_prompt(app: &TestApp, key: &TestKey, text: &str) -> Value {
    let job = app.submit_prompt(key, text).await;
    app.finished_job(key, job).await
}

/// The custom category `gambling`, described in English, with two keywords.
async fn create_gambling_category(app: &TestApp, key: &TestKey) {
    let created = app
        .client
        .request(Method::POST, app.url("/api/v1/custom-categories"))
        .bearer_auth(&key.key)
        .json(&json!({
            "name": "gambling",
            "description": "Promotion of gambling: casinos, sports betting, poker and slot machines.",
            "keywords": ["casino", "betting"],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
}

fn assert_passed(body: &Value) {
    assert_eq!(body["status"], "completed", "{body}");
    assert_eq!(body["is_prohibited"], false, "{body}");
    assert!(body.get("reason").is_none_or(Value::is_null), "{body}");
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn a_threat_without_any_listed_word_is_rejected_naming_the_category_and_score() {
    let (app, key, _worker) = model_fleet().await;

    let text = "Nice house you have there. It would be terrible if it burned down with \
                your family inside one night.";
    let body = judge_prompt(&app, &key, text).await;

    assert_eq!(body["status"], "completed", "{body}");
    assert_eq!(body["is_prohibited"], true, "{body}");
    let reason = body["reason"].as_str().unwrap();
    assert!(reason.contains("violence at 0."), "{reason}");
    for word in ["house", "burned", "family"] {
        assert!(!reason.contains(word), "{reason}");
    }
    let scores = body["scores"]
        .as_object()
        .expect("the job carries its scores");
    for category in ["harassment", "hate", "violence", "self_harm", "sexual"] {
        let score = scores[category].as_f64().expect("a number");
        assert!((0.0..=1.0).contains(&score), "{category}: {score}");
    }
    assert!(scores["violence"].as_f64().unwrap() >= 0.5, "{body}");
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn ordinary_text_and_an_idiom_with_an_alarming_word_pass() {
    let (app, key, _worker) = model_fleet().await;

    let ordinary = judge_prompt(&app, &key, "Could you move our call to Thursday morning?").await;
    let idiom = judge_prompt(&app, &key, "I could murder a pizza").await;

    assert_passed(&ordinary);
    assert_passed(&idiom);
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn a_chat_whose_last_message_is_harmful_is_rejected() {
    let (app, key, _worker) = model_fleet().await;
    let messages = json!([
        {"role": "user", "content": "Can you help me plan a birthday party?"},
        {"role": "assistant", "content": "Of course! How many guests are you expecting?"},
        {"role": "user", "content": "Forget the party. Tell me the quickest way to end my own life."},
    ]);

    let response = app
        .submit("chat", &key, text_form("messages", messages.to_string()))
        .await;
    assert_eq!(response.status(), 202);
    let job: Value = response.json().await.unwrap();
    let body = app
        .finished_job(&key, job["job_id"].as_str().unwrap().parse().unwrap())
        .await;

    assert_eq!(body["is_prohibited"], true, "{body}");
    let reason = body["reason"].as_str().unwrap();
    assert!(reason.contains("self_harm"), "{reason}");
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn a_custom_category_is_judged_by_meaning_without_its_keywords() {
    let (app, key, _worker) = model_fleet().await;
    create_gambling_category(&app, &key).await;

    let on_topic = judge_prompt(
        &app,
        &key,
        "Place your wagers on tonight's football match and win big at our online slots!",
    )
    .await;
    let off_topic = judge_prompt(&app, &key, "The library opens at nine on Saturdays.").await;

    assert_eq!(on_topic["is_prohibited"], true, "{on_topic}");
    assert_eq!(
        on_topic["categories"]["custom"]["gambling"], true,
        "{on_topic}"
    );
    assert!(on_topic["reason"].as_str().unwrap().contains("gambling"));
    assert_passed(&off_topic);
    assert_eq!(
        off_topic["categories"]["custom"]["gambling"], false,
        "{off_topic}"
    );
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn threats_in_other_languages_are_rejected_and_their_ordinary_messages_pass() {
    let (app, key, _worker) = model_fleet().await;

    let spanish = judge_prompt(
        &app,
        &key,
        "Cuando te vea por la calle te voy a matar a golpes.",
    )
    .await;
    let korean = judge_prompt(&app, &key, "너 내일 학교 끝나고 보자. 죽여버릴 거야.").await;
    let german = judge_prompt(
        &app,
        &key,
        "Kannst du morgen die Kinder vom Kindergarten abholen?",
    )
    .await;
    let thai = judge_prompt(&app, &key, "พรุ่งนี้เราไปกินข้าวที่ร้านเดิมกันไหม").await;

    for body in [&spanish, &korean] {
        assert_eq!(body["is_prohibited"], true, "{body}");
        let scores = body["scores"]
            .as_object()
            .expect("the job carries its scores");
        assert!(
            scores.values().any(|s| s.as_f64().unwrap() >= 0.5),
            "{body}"
        );
    }
    assert_passed(&german);
    assert_passed(&thai);
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn a_custom_category_described_in_english_catches_a_spanish_text_by_meaning() {
    let (app, key, _worker) = model_fleet().await;
    create_gambling_category(&app, &key).await;

    let promotion = judge_prompt(
        &app,
        &key,
        "Apuestas deportivas, póker y máquinas tragamonedas: regístrate hoy y recibe un bono.",
    )
    .await;
    let unrelated = judge_prompt(&app, &key, "Mañana vamos al cine con mis primos.").await;

    assert_eq!(promotion["is_prohibited"], true, "{promotion}");
    assert_eq!(
        promotion["categories"]["custom"]["gambling"], true,
        "{promotion}"
    );
    assert_passed(&unrelated);
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn text_in_an_uncovered_script_is_judged_by_the_lists_and_completes() {
    let (app, key, _worker) = model_fleet().await;

    let amharic = judge_prompt(&app, &key, "ሰላም ነው? ዛሬ ስራ በጣም ብዙ ነበር፣ ነገ እንገናኝ።").await;

    assert_passed(&amharic);
    let scored = amharic["scores"]
        .as_object()
        .is_some_and(|scores| !scores.is_empty());
    assert!(!scored, "no model judged it: {amharic}");
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn the_worker_binary_reports_every_text_model_loaded() {
    let app = spawn_app().await;
    let dir = model_dir();
    let port = unused_port();
    let port_text = port.to_string();
    let _worker = moderation_tests::worker::WorkerProcess::spawn(
        &app,
        &app.redis,
        Modality::Text,
        &[
            ("APP_MODEL_DIR", dir.to_str().unwrap()),
            ("APP_LOCAL_MODELS", "required"),
            ("METRICS_PORT", &port_text),
        ],
    );

    let metrics = eventually(
        std::time::Duration::from_secs(120),
        "the worker's metrics",
        || async {
            // Refused until the worker has loaded its models and bound the port.
            let response = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
                .await
                .ok()?;
            response.text().await.ok()
        },
    )
    .await;

    for model in ["text_toxicity", "text_embedding", "text_multilingual"] {
        let line = format!("classifier_model_loaded{{model=\"{model}\"}} 1");
        assert!(metrics.contains(&line), "{line} missing in:\n{metrics}");
    }
}

#[tokio::test]
async fn the_worker_binary_refuses_to_start_without_required_models_naming_the_file() {
    let app = spawn_app().await;
    let missing = std::env::temp_dir().join(format!("no-models-{}", uuid::Uuid::new_v4()));

    let out = Command::new(moderation_tests::binary("worker"))
        .args(["--modality", "text"])
        .env("DATABASE_URL", app.db.settings.url.expose())
        .env("REDIS_URL", app.redis.url.expose())
        .env("APP_REDIS_NAMESPACE", &app.redis.namespace)
        .env("METRICS_PORT", "0")
        .env("RUST_LOG", "warn")
        .env("APP_MODEL_DIR", &missing)
        .env("APP_LOCAL_MODELS", "required")
        .output()
        .unwrap();

    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = missing.join("text").join("profanity.json");
    assert!(
        stderr.contains(&expected.display().to_string()) && stderr.contains("scripts/models"),
        "{stderr}"
    );
}
