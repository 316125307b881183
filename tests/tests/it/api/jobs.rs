use moderation_shared::domain::Scope;
use moderation_tests::{assert_error, spawn_app};
use serde_json::Value;

#[tokio::test]
async fn a_queued_job_reads_back_with_the_contract_shape() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let id = app.submit_prompt(&key, "hello").await;

    let response = app.get(&format!("/api/v1/job/{id}"), &key).await;

    assert_eq!(response.status(), 200);
    let job: Value = response.json().await.unwrap();
    assert_eq!(job["job_id"], id.to_string());
    assert_eq!(job["type"], "text");
    assert_eq!(job["status"], "queued");
    assert_eq!(job["is_prohibited"], Value::Null);
    assert_eq!(job["completed_at"], Value::Null);
    assert!(
        job.get("reason").is_none()
            && job.get("error").is_none()
            && job.get("categories").is_none()
    );
    let created = job["created_at"].as_str().unwrap();
    assert!(
        created.ends_with('Z') && created.len() == "2026-11-22T10:00:00.123Z".len(),
        "{created}"
    );
}

#[tokio::test]
async fn progress_reports_status_stage_attempts_and_update_time() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let id = app.submit_prompt(&key, "hello").await;

    let progress: Value = app
        .get(&format!("/api/v1/job/{id}/progress"), &key)
        .await
        .json()
        .await
        .unwrap();

    assert_eq!(progress["job_id"], id.to_string());
    assert_eq!(progress["status"], "queued");
    assert_eq!(progress["stage"], "queued");
    assert_eq!(progress["attempts"], 0);
    assert!(progress["updated_at"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn another_accounts_job_is_404_everywhere() {
    let app = spawn_app().await;
    let owner = app.account_with_key(None).await;
    let other = app.account_with_key(None).await;
    let id = app.submit_prompt(&owner, "mine").await;

    assert_error(
        app.get(&format!("/api/v1/job/{id}"), &other).await,
        404,
        "NOT_FOUND",
    )
    .await;
    assert_error(
        app.get(&format!("/api/v1/job/{id}/progress"), &other).await,
        404,
        "NOT_FOUND",
    )
    .await;
    let listed: Value = app.get("/api/v1/jobs", &other).await.json().await.unwrap();
    assert_eq!(listed["jobs"], serde_json::json!([]));
    let unknown = uuid::Uuid::new_v4();
    assert_error(
        app.get(&format!("/api/v1/job/{unknown}"), &owner).await,
        404,
        "NOT_FOUND",
    )
    .await;
}

#[tokio::test]
async fn a_malformed_job_id_is_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    assert_error(
        app.get("/api/v1/job/not-a-uuid", &key).await,
        400,
        "INVALID_REQUEST",
    )
    .await;
    assert_error(
        app.get("/api/v1/job/123/progress", &key).await,
        400,
        "INVALID_REQUEST",
    )
    .await;
}

#[tokio::test]
async fn the_job_list_pages_oldest_first_with_a_cursor() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            app.submit_prompt(&key, &format!("job {i}"))
                .await
                .to_string(),
        );
    }

    let mut seen = Vec::new();
    let mut path = "/api/v1/jobs?status=queued&limit=2".to_owned();
    loop {
        let page: Value = app.get(&path, &key).await.json().await.unwrap();
        let jobs = page["jobs"].as_array().unwrap();
        assert!(jobs.len() <= 2);
        seen.extend(
            jobs.iter()
                .map(|j| j["job_id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(cursor) => path = format!("/api/v1/jobs?status=queued&limit=2&cursor={cursor}"),
            None => break,
        }
    }

    assert_eq!(seen, ids);
}

#[tokio::test]
async fn the_job_list_filters_by_status_and_defaults_to_outstanding_jobs() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let queued = app.submit_prompt(&key, "waiting").await;
    let done = app.submit_prompt(&key, "done").await;
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE jobs SET status = 'completed', stage = 'done', is_prohibited = false, completed_at = now() WHERE id = $1",
            &[&done],
        )
        .await
        .unwrap();
    let ids = |page: Value| -> Vec<String> {
        page["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["job_id"].as_str().unwrap().to_owned())
            .collect()
    };

    let default: Value = app.get("/api/v1/jobs", &key).await.json().await.unwrap();
    let completed: Value = app
        .get("/api/v1/jobs?status=completed", &key)
        .await
        .json()
        .await
        .unwrap();
    let both: Value = app
        .get("/api/v1/jobs?status=queued,completed", &key)
        .await
        .json()
        .await
        .unwrap();

    assert_eq!(ids(default), vec![queued.to_string()]);
    let completed_ids = ids(completed.clone());
    assert_eq!(completed_ids, vec![done.to_string()]);
    assert_eq!(completed["jobs"][0]["is_prohibited"], false);
    assert_eq!(ids(both).len(), 2);
}

#[tokio::test]
async fn the_job_list_refuses_unknown_statuses_bad_limits_and_bad_cursors() {
    let app = spawn_app().await;
    let key = app.account_with_key(Some(&[Scope::JobRead])).await;
    app.lift_rate_limit(key.account).await;

    for path in [
        "/api/v1/jobs?status=queued,bogus",
        "/api/v1/jobs?limit=0",
        "/api/v1/jobs?limit=1001",
        "/api/v1/jobs?limit=many",
        "/api/v1/jobs?cursor=%%%",
        "/api/v1/jobs?cursor=bm9wZQ",
    ] {
        assert_error(app.get(path, &key).await, 400, "INVALID_REQUEST").await;
    }
    assert_eq!(app.get("/api/v1/jobs?limit=1", &key).await.status(), 200);
    assert_eq!(app.get("/api/v1/jobs?limit=1000", &key).await.status(), 200);
}
