use moderation_shared::{
    db::{self, audit_events::Actor},
    domain::Modality,
};
use moderation_tests::{forms::text_form, worker::spawn_worker, TestApp, TestKey};
use reqwest::multipart::Form;
use serde_json::{json, Value};
use uuid::Uuid;

use super::fleet_app;

const HOOK: &str = "https://127.0.0.1:9/hook";

async fn text_fleet() -> (TestApp, TestKey, moderation_tests::worker::TestWorker) {
    let app = fleet_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let worker = spawn_worker(&app, |s| s.modalities = vec![Modality::Text]).await;
    (app, key, worker)
}

async fn submit_text(app: &TestApp, key: &TestKey, text: &str) -> Uuid {
    let form = Form::new()
        .text("text", text.to_owned())
        .text("webhook_url", HOOK);
    let response = app.submit("prompt", key, form).await;
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    body["job_id"].as_str().unwrap().parse().unwrap()
}

async fn verdict(app: &TestApp, key: &TestKey, text: &str) -> Value {
    let job = submit_text(app, key, text).await;
    app.finished_job(key, job).await
}

async fn delivered_body(app: &TestApp, job: Uuid) -> Value {
    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one("SELECT body FROM deliveries WHERE job_id = $1", &[&job])
        .await
        .unwrap();
    serde_json::from_slice(row.get::<_, &[u8]>(0)).unwrap()
}

#[tokio::test]
async fn a_disguised_threat_is_rejected_with_a_reason_naming_the_category_not_the_words() {
    let (app, key, _worker) = text_fleet().await;

    let job = submit_text(&app, &key, "ok so I WILL k1ll   y0u tomorrow").await;
    let body = app.finished_job(&key, job).await;

    assert_eq!(body["status"], "completed");
    assert_eq!(body["is_prohibited"], true);
    let reason = body["reason"].as_str().unwrap();
    assert!(reason.contains("violence"), "{reason}");
    for word in ["kill", "k1ll", "y0u", "tomorrow"] {
        assert!(!reason.to_lowercase().contains(word), "{reason}");
    }
    assert!(body.get("categories").is_none(), "{body}");
    assert_eq!(app.deliveries_of(job).await, 1);
    let sent = delivered_body(&app, job).await;
    assert_eq!(sent["is_prohibited"], true);
    assert_eq!(sent["reason"], body["reason"]);
    assert_eq!(sent["job_id"], job.to_string());
}

#[tokio::test]
async fn innocent_text_containing_blocked_words_passes_without_reason_or_categories() {
    let (app, key, _worker) = text_fleet().await;

    let body = verdict(
        &app,
        &key,
        "Scunthorpe has a useful skill centre; the assassin in the class play was a kilnmaker.",
    )
    .await;

    assert_eq!(body["status"], "completed");
    assert_eq!(body["is_prohibited"], false);
    assert!(body.get("reason").is_none_or(Value::is_null), "{body}");
    assert!(body.get("categories").is_none_or(Value::is_null), "{body}");
}

#[tokio::test]
async fn evasion_variants_of_a_global_term_are_all_rejected() {
    let (app, key, _worker) = text_fleet().await;
    let variants = [
        "you should KILL YOURSELF",
        "ｋｉｌｌ ｙｏｕｒｓｅｌｆ",
        "k\u{200B}ill your\u{00AD}self",
        "kïll yoursélf",
        "кill уourself",
        "kiiiiill yourselfffff",
        "k i l l yourself",
    ];
    let mut jobs = Vec::new();
    for text in variants {
        jobs.push((text, submit_text(&app, &key, text).await));
    }
    for (text, job) in jobs {
        let body = app.finished_job(&key, job).await;
        assert_eq!(body["is_prohibited"], true, "{text:?}: {body}");
        assert!(body["reason"].as_str().unwrap().contains("self_harm"));
    }
}

#[tokio::test]
async fn the_account_blocklist_applies_from_the_next_job_after_a_change() {
    let (app, key, _worker) = text_fleet().await;
    let passed = verdict(&app, &key, "I love bananas").await;
    assert_eq!(passed["is_prohibited"], false);

    let mut client = app.db.pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let added = db::blocklist::add(&tx, key.account, Actor::Operator, &["banana".to_owned()])
        .await
        .unwrap();
    assert_eq!(added, db::blocklist::Added::Stored(1));
    tx.commit().await.unwrap();
    let rejected = verdict(&app, &key, "I love B4NANAS? no: I love b a n a n a").await;

    assert_eq!(rejected["is_prohibited"], true, "{rejected}");
    assert!(rejected["reason"]
        .as_str()
        .unwrap()
        .contains("account's blocklist"));
    let other = app.account_with_key(None).await;
    app.lift_rate_limit(other.account).await;
    let elsewhere = verdict(&app, &other, "I love b a n a n a").await;
    assert_eq!(elsewhere["is_prohibited"], false, "another account's list");

    db::blocklist::remove(
        &client,
        key.account,
        Actor::Operator,
        &["banana".to_owned()],
    )
    .await
    .unwrap();
    let again = verdict(&app, &key, "I love b a n a n a").await;
    assert_eq!(again["is_prohibited"], false, "{again}");
}

#[tokio::test]
async fn custom_categories_report_every_enabled_category_and_flag_keyword_hits() {
    let (app, key, _worker) = text_fleet().await;
    let mut client = app.db.pool.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    for (name, keywords, enabled) in [
        ("gambling", vec!["casino", "place your bets"], true),
        ("crypto", vec!["airdrop"], true),
        ("retired", vec!["weather"], false),
    ] {
        let keywords: Vec<String> = keywords.into_iter().map(str::to_owned).collect();
        let category = db::custom_categories::NewCategory {
            name,
            description: "policy",
            keywords: &keywords,
            enabled,
        };
        db::custom_categories::insert(&tx, key.account, Actor::Operator, &category)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();

    let hit = verdict(&app, &key, "Best C4SINO bonus, PLACE your bets now").await;
    let clean = verdict(&app, &key, "Lovely weather for a picnic").await;

    assert_eq!(hit["is_prohibited"], true);
    assert!(hit["reason"].as_str().unwrap().contains("gambling"));
    assert_eq!(
        hit["categories"],
        json!({"custom": {"gambling": true, "crypto": false}})
    );
    assert_eq!(clean["is_prohibited"], false);
    assert_eq!(
        clean["categories"],
        json!({"custom": {"gambling": false, "crypto": false}})
    );
}

#[tokio::test]
async fn a_chat_is_checked_message_by_message() {
    let (app, key, _worker) = text_fleet().await;
    let messages = json!([
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Tell me a story"},
        {"role": "assistant", "content": "Once upon a time... go hang yourself"}
    ]);
    let response = app
        .submit("chat", &key, text_form("messages", messages.to_string()))
        .await;
    assert_eq!(response.status(), 202);
    let job: Value = response.json().await.unwrap();
    let job: Uuid = job["job_id"].as_str().unwrap().parse().unwrap();

    let body = app.finished_job(&key, job).await;

    assert_eq!(body["type"], "text");
    assert_eq!(body["is_prohibited"], true, "{body}");
}

#[tokio::test]
async fn a_job_delivered_twice_completes_once_with_one_delivery() {
    let (app, key, worker) = text_fleet().await;
    let job = submit_text(&app, &key, "a perfectly fine sentence").await;
    let first = app.finished_job(&key, job).await;

    let queue = moderation_tests::worker::queue(&app.redis);
    queue
        .enqueue(Modality::Text, moderation_shared::domain::JobId(job))
        .await
        .unwrap();
    moderation_tests::eventually(
        std::time::Duration::from_secs(10),
        "the duplicate handled",
        || async { (worker.stats.handled() >= 2).then_some(()) },
    )
    .await;

    let again = app.finished_job(&key, job).await;
    assert_eq!(again["completed_at"], first["completed_at"]);
    assert_eq!(again["attempts"], first["attempts"]);
    assert_eq!(app.deliveries_of(job).await, 1);
}

#[tokio::test]
async fn a_text_job_reports_its_language_whatever_judged_it_and_the_webhook_does_not() {
    let (app, key, _worker) = text_fleet().await;

    let spanish = verdict(
        &app,
        &key,
        "Mañana vamos a la playa con los niños y después cenamos en casa de mis padres.",
    )
    .await;
    let threat = submit_text(
        &app,
        &key,
        "I will kill you tomorrow when you walk home from work, and nobody will help you.",
    )
    .await;
    let listed = app.finished_job(&key, threat).await;
    let unknown = verdict(&app, &key, "12345 678 90").await;

    assert_eq!(spanish["language"], "es", "{spanish}");
    assert_eq!(listed["is_prohibited"], true);
    assert_eq!(
        listed["language"], "en",
        "a list hit still reports the language: {listed}"
    );
    assert_eq!(unknown["language"], Value::Null, "{unknown}");
    assert!(unknown.as_object().unwrap().contains_key("language"));
    assert!(delivered_body(&app, threat).await.get("language").is_none());
}
