//! Content erasure: `DELETE /api/v1/job/{id}/content` now, and the lifecycle's erasure of
//! content past `APP_CONTENT_RETENTION_DAYS`; the decision stays, no copy of the text does.

use std::time::Duration as StdDuration;

use moderation_shared::{
    domain::{Modality, Scope},
    lifecycle::ERASE_BATCH,
    url_guard::UrlGuard,
};
use moderation_tests::{
    assert_error, eventually, fixtures::ensure_partitions, receiver::TestReceiver, spawn_app_with,
    worker::spawn_worker, TestApp, TestKey,
};
use reqwest::multipart::Form;
use serde_json::{json, Value};
use time::Duration;
use uuid::Uuid;

use super::lifecycle;

async fn erase(app: &TestApp, key: &TestKey, job: impl std::fmt::Display) -> reqwest::Response {
    app.client
        .delete(app.url(&format!("/api/v1/job/{job}/content")))
        .bearer_auth(&key.key)
        .send()
        .await
        .unwrap()
}

/// A key of a new account with the client defaults and `job:erase`.
async fn erasing_key(app: &TestApp) -> TestKey {
    let key = app
        .account_with_key(Some(&[
            Scope::ModeratePrompt,
            Scope::ModerateChat,
            Scope::JobRead,
            Scope::JobErase,
        ]))
        .await;
    app.lift_rate_limit(key.account).await;
    key
}

async fn audit_actions(
    app: &TestApp,
    account: moderation_shared::domain::AccountId,
) -> Vec<String> {
    let client = app.db.pool.get().await.unwrap();
    client
        .query(
            "SELECT action FROM audit_events WHERE account_id = $1 AND action = 'job.content_erased'",
            &[&account.0],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[tokio::test]
async fn erasing_a_jobs_content_keeps_its_decision_and_leaves_no_copy_of_the_text_anywhere() {
    let app = spawn_app_with(|s| s.url_guard = UrlGuard::system(true)).await;
    let key = erasing_key(&app).await;
    let receiver = TestReceiver::start().await;
    let _worker = spawn_worker(&app, |s| s.modalities = vec![Modality::Text]).await;
    let _dispatcher = app
        .start_dispatcher(app.dispatcher_settings(&receiver, 0.001))
        .await;
    let marker = format!("marker{}", Uuid::new_v4().simple());
    let chat_marker = format!("chatmarker{}", Uuid::new_v4().simple());
    let prompt = app
        .client
        .post(app.url("/api/v1/moderate/prompt"))
        .bearer_auth(&key.key)
        .header("idempotency-key", "erase-me")
        .multipart(
            Form::new()
                .text("text", format!("I will hurt you, {marker}, tomorrow"))
                .text("webhook_url", receiver.url("/hook")),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(prompt.status(), 202);
    let prompt: Uuid = prompt.json::<Value>().await.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let chat = app
        .client
        .post(app.url("/api/v1/moderate/chat"))
        .bearer_auth(&key.key)
        .multipart(Form::new().text(
            "messages",
            json!([{"role": "user", "content": format!("hello {chat_marker}")}]).to_string(),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), 202, "{}", chat.text().await.unwrap());
    let chat: Uuid = chat.json::<Value>().await.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let decided = app.finished_job(&key, prompt).await;
    app.finished_job(&key, chat).await;
    eventually(StdDuration::from_secs(20), "the webhook", || async {
        (!receiver.received().is_empty()).then_some(())
    })
    .await;
    assert!(
        !app.tables_holding(&marker).await.is_empty(),
        "the text is stored until erased"
    );

    let first = erase(&app, &key, prompt).await;
    assert_eq!(first.status(), 204);
    assert_eq!(
        erase(&app, &key, prompt).await.status(),
        204,
        "erasing twice is 204"
    );
    assert_eq!(erase(&app, &key, chat).await.status(), 204);

    let after: Value = app
        .get(&format!("/api/v1/job/{prompt}"), &key)
        .await
        .json()
        .await
        .unwrap();
    for field in [
        "status",
        "is_prohibited",
        "reason",
        "completed_at",
        "language",
    ] {
        assert_eq!(after[field], decided[field], "{field}: {after}");
    }
    assert_eq!(app.tables_holding(&marker).await, Vec::<String>::new());
    assert_eq!(app.tables_holding(&chat_marker).await, Vec::<String>::new());
    assert_eq!(app.redis_keys_holding(&marker).await, Vec::<String>::new());
    assert_eq!(
        app.redis_keys_holding(&chat_marker).await,
        Vec::<String>::new()
    );
    assert_eq!(
        audit_actions(&app, key.account).await.len(),
        2,
        "one event per erasure"
    );

    // The export keeps the row with its decision and an empty prompt.
    let now = moderation_shared::clock::now();
    let window = format!(
        "from={}&to={}",
        (now - Duration::hours(1))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap(),
        (now + Duration::hours(1))
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap(),
    );
    let csv = app
        .get(&format!("/api/v1/jobs/export?{window}"), &key)
        .await
        .text()
        .await
        .unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with(&prompt.to_string()))
        .unwrap();
    let decision = format!(",completed,{},", decided["is_prohibited"]);
    assert!(row.contains(&decision), "{row}");
    assert!(row.contains(",test key,,"), "the prompt is empty: {row}");
    assert!(!csv.contains(&marker), "{csv}");
}

#[tokio::test]
async fn erasure_is_refused_without_its_scope_and_another_accounts_job_is_404() {
    let app = spawn_app_with(|_| {}).await;
    let key = erasing_key(&app).await;
    let other = erasing_key(&app).await;
    let client_default = app.create_key(app.create_account().await, None).await;
    let job = app.submit_prompt(&key, "mine").await;

    assert_error(erase(&app, &other, job).await, 404, "NOT_FOUND").await;
    assert_error(erase(&app, &key, Uuid::now_v7()).await, 404, "NOT_FOUND").await;
    assert_error(
        erase(&app, &key, "not-a-uuid").await,
        400,
        "INVALID_REQUEST",
    )
    .await;
    let own = app.submit_prompt(&client_default, "default scopes").await;
    assert_error(erase(&app, &client_default, own).await, 403, "FORBIDDEN").await;
    assert!(audit_actions(&app, key.account).await.is_empty());
    let client = app.db.pool.get().await.unwrap();
    let kept: Option<String> = client
        .query_one("SELECT content FROM jobs WHERE id = $1", &[&job])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept.as_deref(), Some("mine"));
}

#[tokio::test]
async fn a_job_erased_before_it_is_classified_fails_with_content_erased() {
    let app = spawn_app_with(|_| {}).await;
    let key = erasing_key(&app).await;
    let job = app.submit_prompt(&key, "gone before judged").await;

    assert_eq!(erase(&app, &key, job).await.status(), 204);
    let _worker = spawn_worker(&app, |s| s.modalities = vec![Modality::Text]).await;
    let body = app.finished_job(&key, job).await;

    assert_eq!(body["status"], "failed", "{body}");
    assert_eq!(body["error"]["code"], "CONTENT_ERASED", "{body}");
}

#[tokio::test]
async fn the_lifecycle_erases_content_past_its_retention_in_batches_and_keeps_the_decisions() {
    let app = spawn_app_with(|_| {}).await;
    let key = app.account_with_key(None).await;
    let now = moderation_shared::clock::now();
    let edge = now - Duration::days(30);
    ensure_partitions(&app.db.pool, edge - Duration::days(1)).await;
    let old = 2 * ERASE_BATCH + 1;
    let client = app.db.pool.get().await.unwrap();
    // Past the content retention by a minute or more; and five inside it by a minute or more.
    client
        .execute(
            "INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, \
                               created_at, updated_at, completed_at) \
             SELECT uuid_v7(t), $1, 'text', 'completed', 'done', 'old words', n % 2 = 0, t, t, t \
             FROM generate_series(1, $3::int8) AS n, \
                  LATERAL (SELECT $2::timestamptz - n * interval '1 minute') AS at(t)",
            &[&key.account.0, &edge, &old],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, \
                               created_at, updated_at, completed_at) \
             SELECT uuid_v7(t), $1, 'text', 'completed', 'done', 'young words', false, t, t, t \
             FROM generate_series(1, 5) AS n, \
                  LATERAL (SELECT $2::timestamptz + n * interval '1 minute') AS at(t)",
            &[&key.account.0, &edge],
        )
        .await
        .unwrap();

    let (ok, ran, stderr) = lifecycle(&app, &["run"], &[]);
    assert!(ok, "{stderr}");

    assert_eq!(ran["contents_erased"], old, "{ran}");
    let counts = client
        .query_one(
            "SELECT count(*) FILTER (WHERE content = 'old words'), \
                    count(*) FILTER (WHERE content IS NULL AND content_erased_at IS NOT NULL), \
                    count(*) FILTER (WHERE content = 'young words'), \
                    count(*) FILTER (WHERE is_prohibited) \
             FROM jobs",
            &[],
        )
        .await
        .unwrap();
    let counts: (i64, i64, i64, i64) = (counts.get(0), counts.get(1), counts.get(2), counts.get(3));
    assert_eq!(counts, (0, old, 5, ERASE_BATCH));
}
