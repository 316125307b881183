//! Idempotent submissions: the `Idempotency-Key` header (contract section 11).

use std::time::Duration;

use moderation_shared::{clock, domain::Modality::Text};
use moderation_tests::{
    assert_error, forms::text_form, get_plain, spawn_app, worker::spawn_worker, TestApp, TestKey,
};
use reqwest::{header::HeaderValue, multipart::Form};
use serde_json::Value;
use uuid::Uuid;

const PUBLIC_IMAGE: &str = "http://93.184.215.14/cat.png";
const HOOK: &str = "https://93.184.215.14/hook";

/// `POST /api/v1/moderate/{kind}` with `Idempotency-Key: idem` (any bytes HTTP carries).
async fn submit_keyed(
    app: &TestApp,
    kind: &str,
    key: &TestKey,
    idem: impl AsRef<[u8]>,
    form: Form,
) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/api/v1/moderate/{kind}")))
        .bearer_auth(&key.key)
        .header(
            "idempotency-key",
            HeaderValue::from_bytes(idem.as_ref()).unwrap(),
        )
        .multipart(form)
        .send()
        .await
        .unwrap()
}

/// A 202's job id and whether it carried `idempotent-replayed: true`.
async fn accepted(response: reqwest::Response) -> (Uuid, bool) {
    let status = response.status();
    let replayed = match response.headers().get("idempotent-replayed") {
        None => false,
        Some(value) => {
            assert_eq!(value, "true");
            true
        }
    };
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["status"], "queued");
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    (body["job_id"].as_str().unwrap().parse().unwrap(), replayed)
}

async fn job_count(app: &TestApp) -> i64 {
    let client = app.db.pool.get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM jobs", &[])
        .await
        .unwrap()
        .get(0)
}

/// Moves job `id` and its idempotency key back by `age`, as if it had been submitted that
/// long ago.
async fn age_job(app: &TestApp, id: Uuid, age: Duration) {
    let client = app.db.pool.get().await.unwrap();
    let seconds = age.as_secs_f64();
    client
        .execute(
            "WITH k AS (UPDATE idempotency_keys \
                        SET created_at = created_at - make_interval(secs => $2) \
                        WHERE job_id = $1) \
             UPDATE jobs SET created_at = created_at - make_interval(secs => $2), \
                             updated_at = updated_at - make_interval(secs => $2) \
             WHERE id = $1",
            &[&id, &seconds],
        )
        .await
        .unwrap();
}

/// The idempotency key job `id` holds.
async fn stored_key(app: &TestApp, id: Uuid) -> Option<String> {
    let client = app.db.pool.get().await.unwrap();
    client
        .query_opt("SELECT key FROM idempotency_keys WHERE job_id = $1", &[&id])
        .await
        .unwrap()
        .map(|row| row.get(0))
}

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

#[tokio::test]
async fn the_same_key_and_prompt_answer_the_same_job_marked_replayed_and_create_nothing() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let form = || text_form("text", "hello there").text("webhook_url", HOOK);

    let first = accepted(submit_keyed(&app, "prompt", &key, "order-42", form()).await).await;
    let second = accepted(submit_keyed(&app, "prompt", &key, "order-42", form()).await).await;

    assert!(!first.1, "a first submission is not marked replayed");
    assert_eq!(second, (first.0, true));
    assert_eq!(job_count(&app).await, 1);
    assert_eq!(app.stream_len(Text).await, 1);
    assert_eq!(stored_key(&app, first.0).await.as_deref(), Some("order-42"));
}

#[tokio::test]
async fn the_same_key_with_any_field_changed_is_409_conflict() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    accepted(submit_keyed(&app, "prompt", &key, "k", text_form("text", "hello")).await).await;

    let other_text = submit_keyed(&app, "prompt", &key, "k", text_form("text", "hello!")).await;
    let with_hook = submit_keyed(
        &app,
        "prompt",
        &key,
        "k",
        text_form("text", "hello").text("webhook_url", HOOK),
    )
    .await;

    assert_error(other_text, 409, "CONFLICT").await;
    assert_error(with_hook, 409, "CONFLICT").await;
    assert_eq!(job_count(&app).await, 1);
    assert_eq!(app.stream_len(Text).await, 1);
}

#[tokio::test]
async fn the_same_key_on_another_endpoint_with_the_same_fields_is_409_conflict() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let media = |field: &str| text_form(field, PUBLIC_IMAGE).text("webhook_url", HOOK);
    accepted(submit_keyed(&app, "image", &key, "k", media("image")).await).await;

    let as_video = submit_keyed(&app, "video", &key, "k", media("video")).await;
    let again = submit_keyed(&app, "image", &key, "k", media("image")).await;

    assert_error(as_video, 409, "CONFLICT").await;
    assert!(accepted(again).await.1);
    assert_eq!(job_count(&app).await, 1);
}

#[tokio::test]
async fn a_chat_replays_whatever_its_json_spacing_and_key_order_but_not_another_message() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let compact = r#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#;
    let spaced = r#"[ {"content": "hi", "role": "user"},
                      {"content": "hello", "role": "assistant"} ]"#;
    let other_role = r#"[{"role":"user","content":"hi"},{"role":"system","content":"hello"}]"#;

    let first =
        accepted(submit_keyed(&app, "chat", &key, "c", text_form("messages", compact)).await).await;
    let respaced =
        accepted(submit_keyed(&app, "chat", &key, "c", text_form("messages", spaced)).await).await;
    let changed = submit_keyed(&app, "chat", &key, "c", text_form("messages", other_role)).await;
    let as_prompt = submit_keyed(
        &app,
        "prompt",
        &key,
        "c",
        text_form("text", "user: hi\nassistant: hello"),
    )
    .await;

    assert_eq!(respaced, (first.0, true));
    assert_error(changed, 409, "CONFLICT").await;
    assert_error(as_prompt, 409, "CONFLICT").await;
    assert_eq!(job_count(&app).await, 1);
}

#[tokio::test]
async fn a_key_of_255_printable_characters_is_accepted_and_256_empty_or_unprintable_are_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let send =
        |idem: &[u8]| submit_keyed(&app, "prompt", &key, idem.to_vec(), text_form("text", "x"));
    let printable: String = (b' '..=b'~').map(char::from).cycle().take(255).collect();

    let at_limit = send(printable.as_bytes()).await;
    let over = send("k".repeat(256).as_bytes()).await;
    let empty = send(b"").await;
    let tab = send(b"a\tb").await;
    let non_ascii = send("caf\u{e9}".as_bytes()).await;
    let high_byte = send(b"key\xff").await;

    accepted(at_limit).await;
    for refused in [over, empty, tab, non_ascii, high_byte] {
        let body = assert_error(refused, 400, "INVALID_REQUEST").await;
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("Idempotency-Key"),
            "{body}"
        );
    }
    assert_eq!(job_count(&app).await, 1);
}

#[tokio::test]
async fn two_idempotency_key_headers_are_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    let response = app
        .client
        .post(app.url("/api/v1/moderate/prompt"))
        .bearer_auth(&key.key)
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .multipart(text_form("text", "x"))
        .send()
        .await
        .unwrap();

    assert_error(response, 400, "INVALID_REQUEST").await;
    assert_eq!(job_count(&app).await, 0);
}

#[tokio::test]
async fn the_same_key_from_another_account_creates_its_own_job() {
    let app = spawn_app().await;
    let alice = app.account_with_key(None).await;
    let bob = app.account_with_key(None).await;

    let (alices, _) =
        accepted(submit_keyed(&app, "prompt", &alice, "k", text_form("text", "hi")).await).await;
    let (bobs, replayed) =
        accepted(submit_keyed(&app, "prompt", &bob, "k", text_form("text", "hi")).await).await;
    let bob_other = submit_keyed(&app, "prompt", &bob, "k", text_form("text", "other")).await;

    assert_ne!(alices, bobs);
    assert!(!replayed);
    assert_error(bob_other, 409, "CONFLICT").await;
    assert_eq!(job_count(&app).await, 2);
}

#[tokio::test]
async fn keys_that_differ_only_in_case_are_different_keys() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let form = || text_form("text", "hi");

    let mut jobs = Vec::new();
    for idem in ["Key-1", "key-1", "KEY-1", "kEy-1"] {
        let (id, replayed) = accepted(submit_keyed(&app, "prompt", &key, idem, form()).await).await;
        assert!(!replayed, "{idem:?} was taken for another key");
        jobs.push(id);
    }
    let (again, replayed) =
        accepted(submit_keyed(&app, "prompt", &key, "key-1", form()).await).await;

    assert_eq!((again, replayed), (jobs[1], true));
    jobs.sort();
    jobs.dedup();
    assert_eq!(jobs.len(), 4);
    assert_eq!(job_count(&app).await, 4);
}

#[tokio::test]
async fn a_replay_after_the_job_completed_answers_202_with_the_same_job() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    // Polling the job for its end must not use up the rate limit the replay needs.
    app.lift_rate_limit(key.account).await;
    let form = || text_form("text", "what a lovely day");
    let (id, _) = accepted(submit_keyed(&app, "prompt", &key, "k", form()).await).await;
    let _worker = spawn_worker(&app, |s| s.modalities = vec![Text]).await;
    let finished = app.finished_job(&key, id).await;
    assert_eq!(finished["status"], "completed", "{finished}");

    let replay = accepted(submit_keyed(&app, "prompt", &key, "k", form()).await).await;

    assert_eq!(replay, (id, true));
    assert_eq!(job_count(&app).await, 1);
}

#[tokio::test]
async fn a_key_older_than_24_hours_no_longer_binds_and_a_new_submission_takes_it() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let (old, _) =
        accepted(submit_keyed(&app, "prompt", &key, "k", text_form("text", "first")).await).await;
    let (same_old, _) =
        accepted(submit_keyed(&app, "prompt", &key, "s", text_form("text", "same")).await).await;
    let (young, _) =
        accepted(submit_keyed(&app, "prompt", &key, "y", text_form("text", "young")).await).await;
    age_job(&app, old, DAY + Duration::from_secs(1)).await;
    age_job(&app, same_old, DAY + Duration::from_secs(1)).await;
    age_job(&app, young, DAY - Duration::from_secs(60)).await;

    let (other, other_replayed) =
        accepted(submit_keyed(&app, "prompt", &key, "k", text_form("text", "second")).await).await;
    let (same, same_replayed) =
        accepted(submit_keyed(&app, "prompt", &key, "s", text_form("text", "same")).await).await;
    let still_bound = submit_keyed(&app, "prompt", &key, "y", text_form("text", "changed")).await;

    assert_ne!(other, old);
    assert!(!other_replayed);
    assert_ne!(same, same_old);
    assert!(!same_replayed);
    assert_error(still_bound, 409, "CONFLICT").await;
    assert_eq!(stored_key(&app, old).await, None);
    assert_eq!(stored_key(&app, other).await.as_deref(), Some("k"));
    assert_eq!(stored_key(&app, same).await.as_deref(), Some("s"));
    assert_eq!(job_count(&app).await, 5);
    assert_eq!(app.stream_len(Text).await, 5);
}

#[tokio::test]
async fn the_purge_clears_keys_older_than_24_hours_and_keeps_younger_ones() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let mut ids = Vec::new();
    for (idem, text) in [("old-1", "a"), ("old-2", "b"), ("young", "c")] {
        let response = submit_keyed(&app, "prompt", &key, idem, text_form("text", text)).await;
        ids.push(accepted(response).await.0);
    }
    age_job(&app, ids[0], DAY + Duration::from_secs(1)).await;
    age_job(&app, ids[1], 2 * DAY).await;
    age_job(&app, ids[2], DAY - Duration::from_secs(60)).await;

    let cleared = moderation_worker::key_purge::try_purge(&app.db.pool, clock::now())
        .await
        .unwrap();
    let again = moderation_worker::key_purge::try_purge(&app.db.pool, clock::now())
        .await
        .unwrap();

    assert_eq!((cleared, again), (2, 0));
    assert_eq!(stored_key(&app, ids[0]).await, None);
    assert_eq!(stored_key(&app, ids[1]).await, None);
    assert_eq!(stored_key(&app, ids[2]).await.as_deref(), Some("young"));
    let client = app.db.pool.get().await.unwrap();
    let fingerprints: i64 = client
        .query_one("SELECT count(*) FROM idempotency_keys", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(fingerprints, 1);
    let replay = submit_keyed(&app, "prompt", &key, "old-1", text_form("text", "a")).await;
    let (fresh, replayed) = accepted(replay).await;
    assert_ne!(fresh, ids[0]);
    assert!(!replayed);
}

#[tokio::test]
async fn fifty_concurrent_requests_with_one_key_create_one_job_and_all_answer_it() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;

    let requests = (0..50).map(|_| {
        submit_keyed(
            &app,
            "prompt",
            &key,
            "burst",
            text_form("text", "one job only"),
        )
    });
    let responses = futures_util::future::join_all(requests).await;

    let mut answers = Vec::new();
    for response in responses {
        answers.push(accepted(response).await);
    }
    let job = answers[0].0;
    assert!(answers.iter().all(|(id, _)| *id == job), "{answers:?}");
    assert_eq!(answers.iter().filter(|(_, replayed)| !replayed).count(), 1);
    assert_eq!(job_count(&app).await, 1);
    assert_eq!(app.stream_len(Text).await, 1);
}

#[tokio::test]
async fn replays_and_conflicts_in_a_concurrent_burst_leave_the_other_submissions_alone() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let (held, _) =
        accepted(submit_keyed(&app, "prompt", &key, "held", text_form("text", "a")).await).await;

    let requests = (0..40).map(|i| {
        let app = &app;
        let key = &key;
        async move {
            let response = match i % 4 {
                0 => submit_keyed(app, "prompt", key, "held", text_form("text", "a")).await,
                1 => submit_keyed(app, "prompt", key, "held", text_form("text", "b")).await,
                2 => {
                    let idem = format!("fresh-{i}");
                    let form = text_form("text", format!("fresh {i}"));
                    submit_keyed(app, "prompt", key, idem, form).await
                }
                _ => app.submit("prompt", key, text_form("text", "plain")).await,
            };
            (i, response)
        }
    });
    let responses = futures_util::future::join_all(requests).await;

    for (i, response) in responses {
        match i % 4 {
            0 => assert_eq!(accepted(response).await, (held, true)),
            1 => {
                assert_error(response, 409, "CONFLICT").await;
            }
            _ => {
                let (id, replayed) = accepted(response).await;
                assert_ne!(id, held);
                assert!(!replayed);
            }
        }
    }
    assert_eq!(job_count(&app).await, 1 + 20);
    assert_eq!(app.stream_len(Text).await, 1 + 20);
}

#[tokio::test]
async fn the_document_gives_every_submission_the_key_header_the_replay_header_and_409() {
    let app = spawn_app().await;

    let (status, _, body) = get_plain(app.port, "/api/v1/openapi.json").await;

    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&body).unwrap();
    for kind in ["prompt", "chat", "image", "video", "audio"] {
        let operation = &doc["paths"][format!("/api/v1/moderate/{kind}")]["post"];
        let parameter = operation["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "Idempotency-Key")
            .unwrap_or_else(|| panic!("{kind} documents no Idempotency-Key"));
        assert_eq!(parameter["in"], "header");
        assert_eq!(parameter["required"], false);
        assert_eq!(parameter["schema"]["maxLength"], 255);
        let responses = &operation["responses"];
        assert!(
            responses["202"]["headers"]["idempotent-replayed"].is_object(),
            "{kind}"
        );
        assert_eq!(
            responses["409"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody",
            "{kind}"
        );
    }
}
