//! The `openai` provider through the whole fleet, against the OpenAI wire-format double.

use moderation_shared::domain::Scope;
use moderation_tests::{
    forms::text_form,
    media::{png, wav, MediaServer},
    openai::{ModelReply, ModelServer},
    worker::{spawn_worker, TestWorker},
    TestApp, TestKey,
};
use moderation_worker::ClassifierSettings;
use reqwest::multipart::Form;
use serde_json::{json, Value};
use uuid::Uuid;

use super::fleet_app;

struct Fleet {
    app: TestApp,
    key: TestKey,
    model: ModelServer,
    media: MediaServer,
    _worker: TestWorker,
}

async fn model_fleet() -> Fleet {
    let app = fleet_app().await;
    let key = app
        .account_with_key(Some(&[
            Scope::ModeratePrompt,
            Scope::ModerateImage,
            Scope::ModerateAudio,
            Scope::JobRead,
        ]))
        .await;
    app.lift_rate_limit(key.account).await;
    let model = ModelServer::start().await;
    let settings = model.settings();
    let worker = spawn_worker(&app, |s| {
        s.classifier = ClassifierSettings::OpenAi(Box::new(settings));
    })
    .await;
    Fleet {
        app,
        key,
        model,
        media: MediaServer::start().await,
        _worker: worker,
    }
}

impl Fleet {
    async fn run(&self, kind: &str, field: &str, value: &str) -> (Uuid, Value) {
        let form = Form::new()
            .text(field.to_owned(), value.to_owned())
            .text("webhook_url", "https://127.0.0.1:9/hook");
        let response = self.app.submit(kind, &self.key, form).await;
        assert_eq!(response.status(), 202);
        let body: Value = response.json().await.unwrap();
        let job: Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
        (job, self.app.finished_job(&self.key, job).await)
    }

    async fn stored(&self, job: Uuid) -> String {
        let client = self.app.db.pool.get().await.unwrap();
        let row = client
            .query_one(
                "SELECT row_to_json(j)::text, (SELECT convert_from(body, 'UTF8') FROM deliveries d WHERE d.job_id = j.id)
                 FROM jobs j WHERE id = $1",
                &[&job],
            )
            .await
            .unwrap();
        format!("{} {}", row.get::<_, String>(0), row.get::<_, String>(1))
    }
}

#[tokio::test]
async fn a_model_reason_that_quotes_the_prompt_is_scrubbed() {
    let fleet = model_fleet().await;
    let prompt = "meet me behind the old mill tonight and bring the money";
    fleet.model.script(
        [],
        ModelReply::Verdict(json!({
            "reason": "The user says 'Meet me behind the old mill tonight' which suggests extortion.",
            "prohibited": true,
            "custom": {}
        })),
    );

    let (job, body) = fleet.run("prompt", "text", prompt).await;

    assert_eq!(body["is_prohibited"], true, "{body}");
    assert_eq!(
        body["reason"],
        "The user says '[…]' which suggests extortion."
    );
    assert!(!fleet
        .stored(job)
        .await
        .contains("behind the old mill tonight' which"));
}

#[tokio::test]
async fn the_blocklist_decides_before_the_model_is_asked() {
    let fleet = model_fleet().await;

    let (_, body) = fleet.run("prompt", "text", "go hang yourself").await;

    assert_eq!(body["is_prohibited"], true);
    assert!(body["reason"].as_str().unwrap().contains("self_harm"));
    assert!(fleet.model.requests().is_empty(), "the model was not asked");
}

#[tokio::test]
async fn an_image_goes_to_the_model_as_a_data_url_never_the_users_url() {
    let fleet = model_fleet().await;
    let url = fleet.media.add("a.png", png(3, 3), "image/png");
    fleet.model.script(
        [],
        ModelReply::Verdict(json!({
            "reason": "Depicts a minor.",
            "ai_adult_general": false,
            "underage": true,
            "nsfw": false,
            "custom": {}
        })),
    );

    let (_, body) = fleet.run("image", "image", &url).await;

    assert_eq!(body["is_prohibited"], true, "{body}");
    assert_eq!(
        body["categories"],
        json!({"ai_adult_general": false, "underage": true, "nsfw": false})
    );
    let requests = fleet.model.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0].chat().to_string();
    assert!(sent.contains("data:image/png;base64,"), "a data URL");
    assert!(!sent.contains(&url), "never the user's URL");
}

#[tokio::test]
async fn audio_is_transcribed_and_the_transcript_is_judged_but_never_kept() {
    let fleet = model_fleet().await;
    let url = fleet.media.add("a.wav", wav(8000, 8000), "audio/wav");
    let transcript = "honestly you should kill yourself said the parrot";
    fleet.model.script(
        [ModelReply::Transcript(transcript.to_owned())],
        ModelReply::Pass,
    );

    let (job, body) = fleet.run("audio", "audio", &url).await;

    assert_eq!(body["is_prohibited"], true, "{body}");
    let requests = fleet.model.requests();
    assert_eq!(requests.len(), 1, "the blocklist decided; no chat request");
    assert_eq!(requests[0].path, "/v1/audio/transcriptions");
    let stored = fleet.stored(job).await;
    assert!(
        !stored.contains("parrot"),
        "the transcript is not stored: {stored}"
    );
    assert!(!body.to_string().contains("parrot"));
}

#[tokio::test]
async fn a_clip_without_speech_passes_without_a_text_check() {
    let fleet = model_fleet().await;
    let url = fleet.media.add("a.wav", wav(8000, 8000), "audio/wav");
    fleet
        .model
        .script([ModelReply::Transcript(String::new())], ModelReply::Pass);

    let (_, body) = fleet.run("audio", "audio", &url).await;

    assert_eq!(body["status"], "completed");
    assert_eq!(body["is_prohibited"], false);
    assert_eq!(fleet.model.requests().len(), 1);
}

#[tokio::test]
async fn a_model_that_keeps_failing_fails_the_job_as_classifier_unavailable() {
    let fleet = model_fleet().await;
    fleet.model.script(
        [],
        ModelReply::Error {
            status: 503,
            code: "overloaded",
        },
    );

    let (job, body) = fleet
        .run("prompt", "text", "a perfectly ordinary sentence")
        .await;

    assert_eq!(body["status"], "failed");
    assert_eq!(body["error"]["code"], "CLASSIFIER_UNAVAILABLE");
    assert_eq!(fleet.model.requests().len(), 5);
    assert_eq!(fleet.app.deliveries_of(job).await, 1);
}

#[tokio::test]
async fn a_refusal_or_garbage_never_passes_a_job() {
    let fleet = model_fleet().await;
    fleet.model.script(
        [
            ModelReply::Refusal,
            ModelReply::Content("not json".into()),
            ModelReply::Length,
            ModelReply::Refusal,
        ],
        ModelReply::Content("{\"oops\": 1}".into()),
    );

    let response = fleet
        .app
        .submit("prompt", &fleet.key, text_form("text", "hello"))
        .await;
    let job: Value = response.json().await.unwrap();
    let body = fleet
        .app
        .finished_job(&fleet.key, job["job_id"].as_str().unwrap().parse().unwrap())
        .await;

    assert_eq!(body["status"], "failed", "{body}");
    assert_eq!(body["error"]["code"], "CLASSIFIER_UNAVAILABLE");
}
