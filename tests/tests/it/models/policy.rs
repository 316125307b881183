//! Policy versions over the real text model's scores (contract 13): `observe` records a score
//! without acting, a shadow reports what it would have decided, `modctl job` names the models
//! and the version that decided a job, and every job decided after an activation's answer uses
//! the new version while submissions keep arriving.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex,
    },
    time::Duration,
};

use moderation_shared::domain::Scope;
use moderation_tests::{eventually, TestApp, TestKey};
use serde_json::{json, Value};
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

use super::text::{judge_prompt, model_fleet};

/// A threat without any listed word: the text model rejects it for violence at the defaults.
const THREAT: &str = "Nice house you have there. It would be terrible if it burned down with \
                      your family inside one night.";

const TEXT_CATEGORIES: [&str; 5] = ["harassment", "hate", "violence", "self_harm", "sexual"];

/// `POST path` with `body` as `key`; the answer's JSON, after asserting a 2xx.
async fn post(app: &TestApp, key: &TestKey, path: &str, body: Option<Value>) -> Value {
    let mut request = app.client.post(app.url(path)).bearer_auth(&key.key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// A draft with every text category in `mode` (at the default `block_at`), except those in
/// `enforced`, enforced at the `block_at` given; returns its number.
async fn draft(app: &TestApp, admin: &TestKey, mode: &str, enforced: &[(&str, f64)]) -> i64 {
    let mut categories = serde_json::Map::new();
    for category in TEXT_CATEGORIES {
        let rule = match enforced.iter().find(|(name, _)| *name == category) {
            Some((_, block_at)) => {
                json!({"mode": "enforce", "block_at": block_at, "review_at": null})
            }
            None => json!({"mode": mode, "block_at": 0.5, "review_at": null}),
        };
        categories.insert(category.to_owned(), rule);
    }
    let created = post(
        app,
        admin,
        "/api/v1/policy/versions",
        Some(json!({"categories": categories, "note": format!("text categories {mode}")})),
    )
    .await;
    created["version"].as_i64().unwrap()
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn observe_records_the_score_without_acting_and_a_shadow_reports_its_own_decision() {
    let (app, key, _worker) = model_fleet().await;
    let admin = app
        .create_key(key.account, Some(&[Scope::SettingsManage]))
        .await;

    let enforced = judge_prompt(&app, &key, THREAT).await;
    assert_eq!(enforced["is_prohibited"], true, "{enforced}");
    assert_eq!(enforced["policy_version"], 1, "{enforced}");
    let violence = enforced["scores"]["violence"].as_f64().unwrap();
    assert!(violence >= 0.5, "{enforced}");

    let observing = draft(&app, &admin, "observe", &[]).await;
    post(
        &app,
        &admin,
        &format!("/api/v1/policy/versions/{observing}/activate"),
        None,
    )
    .await;
    let observed = judge_prompt(&app, &key, THREAT).await;
    assert_eq!(observed["is_prohibited"], false, "{observed}");
    assert_eq!(observed["policy_version"], observing, "{observed}");
    assert_eq!(
        observed["scores"]["violence"],
        enforced["scores"]["violence"]
    );
    assert!(observed.get("shadow").is_none(), "{observed}");

    // A stricter shadow beside the observing version: it would reject, the job passes.
    let strict = draft(&app, &admin, "observe", &[("violence", violence - 0.1)]).await;
    post(
        &app,
        &admin,
        &format!("/api/v1/policy/versions/{strict}/shadow"),
        None,
    )
    .await;
    let shadowed = judge_prompt(&app, &key, THREAT).await;
    assert_eq!(shadowed["is_prohibited"], false, "{shadowed}");
    assert_eq!(shadowed["policy_version"], observing, "{shadowed}");
    assert_eq!(shadowed["shadow"]["policy_version"], strict, "{shadowed}");
    assert_eq!(shadowed["shadow"]["is_prohibited"], true, "{shadowed}");

    // The operator sees which models and which version decided it.
    let job_id = shadowed["job_id"].as_str().unwrap();
    let (ok, shown, stderr) =
        crate::modctl::modctl(&app, &["job", "--org", &key.account.to_string(), job_id]);
    assert!(ok, "{stderr}");
    assert_eq!(shown["policy_version"], observing, "{shown}");
    assert_eq!(shown["shadow"]["policy_version"], strict, "{shown}");
    let set = shown["model_set"].as_str().expect("a model set");
    assert_eq!(set.len(), 16, "{shown}");
    let models = shown["models"].as_object().expect("the set's models");
    assert!(!models.is_empty(), "{shown}");
    for hash in models.values() {
        let hash = hash.as_str().unwrap();
        assert_eq!(hash.len(), 64, "{shown}");
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()), "{shown}");
    }
    // The first job was scored by the same models.
    let enforced_id = enforced["job_id"].as_str().unwrap();
    let (_, first, _) = crate::modctl::modctl(
        &app,
        &["job", "--org", &key.account.to_string(), enforced_id],
    );
    assert_eq!(first["model_set"], set, "{first}");
    assert_eq!(first["policy_version"], 1, "{first}");
}

/// Jobs of the account completed so far.
async fn completed(app: &TestApp, key: &TestKey) -> i64 {
    let client = app.db.pool.get().await.unwrap();
    client
        .query_one(
            "SELECT count(*) FROM jobs WHERE account_id = $1 AND status = 'completed'",
            &[&key.account.0],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
async fn every_job_decided_after_the_activate_answer_uses_the_new_version_under_load() {
    let (app, key, _worker) = model_fleet().await;
    let admin = app
        .create_key(key.account, Some(&[Scope::SettingsManage]))
        .await;
    let observing = draft(&app, &admin, "observe", &[]).await;
    let stop = AtomicBool::new(false);
    let submitted = Mutex::new(Vec::new());
    let answered: Mutex<Option<OffsetDateTime>> = Mutex::new(None);

    // Four clients submit without pause while the version is activated.
    let submitter = || async {
        while !stop.load(Ordering::SeqCst) {
            let job = app.submit_prompt(&key, THREAT).await;
            submitted.lock().unwrap().push(job);
        }
    };
    let switch = async {
        eventually(
            Duration::from_secs(120),
            "jobs decided by version 1",
            || async { (completed(&app, &key).await >= 6).then_some(()) },
        )
        .await;
        post(
            &app,
            &admin,
            &format!("/api/v1/policy/versions/{observing}/activate"),
            None,
        )
        .await;
        *answered.lock().unwrap() = Some(moderation_shared::clock::now());
        let before = submitted.lock().unwrap().len();
        eventually(
            Duration::from_secs(120),
            "submissions after the answer",
            || async { (submitted.lock().unwrap().len() >= before + 8).then_some(()) },
        )
        .await;
        stop.store(true, Ordering::SeqCst);
    };
    tokio::join!(submitter(), submitter(), submitter(), submitter(), switch);

    let answered = answered.lock().unwrap().unwrap();
    let jobs = submitted.lock().unwrap().clone();
    let (mut old, mut new) = (0, 0);
    for job in jobs {
        let body = app.finished_job(&key, job).await;
        let completed_at =
            OffsetDateTime::parse(body["completed_at"].as_str().unwrap(), &Rfc3339).unwrap();
        // `completed_at` is shown to the millisecond, truncated.
        if completed_at > answered {
            assert_eq!(
                body["policy_version"], observing,
                "decided after the answer: {body}"
            );
        }
        // Each decision is the one its version gives.
        if body["policy_version"] == observing {
            assert_eq!(body["is_prohibited"], false, "{body}");
            new += 1;
        } else {
            assert_eq!(body["policy_version"], 1, "{body}");
            assert_eq!(body["is_prohibited"], true, "{body}");
            old += 1;
        }
    }
    assert!(
        old >= 6 && new >= 8,
        "{old} jobs by version 1, {new} by the new one"
    );
}
