//! The impact preview (contract 13): a version applied to stored scores, no model run.

use moderation_shared::db;
use moderation_tests::{assert_error, plans, spawn_app, TestApp, TestKey};
use reqwest::Method;
use serde_json::{json, Value};

use super::{send, settings_key};

async fn impact(app: &TestApp, key: &TestKey, version: i32, query: &str) -> reqwest::Response {
    send(
        app,
        Method::GET,
        &format!("/api/v1/policy/versions/{version}/impact{query}"),
        key,
        None,
    )
    .await
}

#[tokio::test]
async fn a_version_is_applied_to_stored_scores_against_the_decisions_jobs_got() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let scoring = app
        .create_key(
            key.account,
            Some(&[moderation_shared::domain::Scope::ModeratePrompt]),
        )
        .await;
    let stricter = app
        .finished_with_scores(&scoring, false, false, &[("violence", 400), ("hate", 10)])
        .await;
    let laxer = app
        .finished_with_scores(&scoring, true, false, &[("hate", 600), ("violence", 10)])
        .await;
    app.finished_with_scores(&scoring, true, true, &[("hate", 100)])
        .await;
    app.finished_with_scores(&scoring, false, false, &[]).await;
    app.finished_with_scores(&scoring, false, false, &[("sexual", 450)])
        .await;
    let created = send(
        &app,
        Method::POST,
        "/api/v1/policy/versions",
        &key,
        Some(&json!({
            "categories": {
                "violence": {"mode": "enforce", "block_at": 0.3},
                "hate": {"mode": "enforce", "block_at": 0.9},
                "sexual": {"mode": "enforce", "block_at": 0.5, "review_at": 0.4}
            }
        })),
    )
    .await;
    assert_eq!(created.status(), 201);

    let response = impact(&app, &key, 2, "").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();

    assert_eq!(body["jobs"], 5);
    assert_eq!(
        body["rescored"], 4,
        "a job without scores keeps its decision"
    );
    assert_eq!(body["pass_to_reject"], 1);
    assert_eq!(body["reject_to_pass"], 1, "a list's rejection stands");
    assert_eq!(body["to_review"], 1, "sexual 0.45 is in the band");
    assert_eq!(body["by_category"]["violence"]["pass_to_reject"], 1);
    assert_eq!(body["by_category"]["hate"]["reject_to_pass"], 1);
    assert_eq!(body["examples"]["pass_to_reject"], json!([stricter.0]));
    assert_eq!(body["examples"]["reject_to_pass"], json!([laxer.0]));

    let active = impact(&app, &key, 1, "")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        (
            active["pass_to_reject"].clone(),
            active["reject_to_pass"].clone()
        ),
        (json!(0), json!(0)),
        "the version that decided them flips nothing: {active}"
    );
}

#[tokio::test]
async fn the_window_is_checked_at_its_edges() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;

    let month = impact(
        &app,
        &key,
        1,
        "?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z",
    )
    .await;
    assert_eq!(month.status(), 200, "31 days is allowed");
    for query in [
        "?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00.001Z",
        "?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
        "?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z",
        "?from=last-week",
    ] {
        assert_error(impact(&app, &key, 1, query).await, 400, "INVALID_REQUEST").await;
    }
    let outside: Value = impact(
        &app,
        &key,
        1,
        "?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(outside["jobs"], 0);
}

#[tokio::test]
async fn the_preview_reads_the_accounts_scores_through_its_index() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let client = app.db.pool.get().await.unwrap();
    // Statistics of a table holding many accounts' rows, as in production.
    client
        .batch_execute(
            "INSERT INTO job_scores (job_id, account_id, prohibited, listed) \
             SELECT uuid_v7(), gen_random_uuid(), false, false \
             FROM generate_series(1, 20000); ANALYZE job_scores",
        )
        .await
        .unwrap();
    let to = moderation_shared::clock::now();
    let from = to - time::Duration::days(31);

    let plan = db::job_scores::window_plan(&client, key.account, from, to)
        .await
        .unwrap();

    // The covering index (V019), whose partitions' names start with these columns.
    assert!(plan.contains("_account_id_job_id_prohibited_"), "{plan}");
    assert_eq!(
        plans::full_reads(&client, &plan).await,
        Vec::<String>::new(),
        "{plan}"
    );
}
