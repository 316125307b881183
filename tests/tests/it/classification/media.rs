use moderation_shared::{
    db::{self, audit_events::Actor, hash_bank::NewEntry},
    domain::AccountId,
    media_hash,
};
use moderation_tests::{
    media::{jpeg, mp3_with_junk, png, wav, MediaServer},
    worker::{spawn_worker, TestWorker, WorkerProcess},
    TestApp, TestKey,
};
use reqwest::multipart::Form;
use serde_json::{json, Value};
use uuid::Uuid;

use super::fleet_app;

struct Fleet {
    app: TestApp,
    key: TestKey,
    media: MediaServer,
    _worker: TestWorker,
}

async fn media_fleet() -> Fleet {
    let app = fleet_app().await;
    let key = app
        .account_with_key(Some(&[
            moderation_shared::domain::Scope::ModerateImage,
            moderation_shared::domain::Scope::ModerateVideo,
            moderation_shared::domain::Scope::ModerateAudio,
            moderation_shared::domain::Scope::JobRead,
        ]))
        .await;
    app.lift_rate_limit(key.account).await;
    let worker = spawn_worker(&app, |_| {}).await;
    Fleet {
        app,
        key,
        media: MediaServer::start().await,
        _worker: worker,
    }
}

impl Fleet {
    async fn run(&self, kind: &str, url: &str) -> (Uuid, Value) {
        let form = Form::new()
            .text(kind.to_owned(), url.to_owned())
            .text("webhook_url", "https://127.0.0.1:9/hook");
        let response = self.app.submit(kind, &self.key, form).await;
        assert_eq!(response.status(), 202, "{url}");
        let body: Value = response.json().await.unwrap();
        let job: Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
        (job, self.app.finished_job(&self.key, job).await)
    }

    async fn bank(
        &self,
        account: Option<AccountId>,
        category: &str,
        sha: Option<[u8; 32]>,
        pdq: Option<[u8; 32]>,
    ) {
        let client = self.app.db.pool.get().await.unwrap();
        db::hash_bank::insert(
            &client,
            &NewEntry {
                account,
                category: category.to_owned(),
                sha256: sha,
                pdq,
            },
        )
        .await
        .unwrap();
    }

    async fn set_nsfw_check(&self, on: bool) {
        let client = self.app.db.pool.get().await.unwrap();
        client
            .execute(
                "UPDATE accounts SET nsfw_check = $2 WHERE id = $1",
                &[&self.key.account.0, &on],
            )
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn an_image_in_the_global_bank_is_rejected_with_its_category() {
    let fleet = media_fleet().await;
    let url = fleet.media.add("a.png", png(10, 10), "image/png");
    fleet
        .bank(
            None,
            "underage",
            Some(media_hash::sha256(&png(10, 10))),
            None,
        )
        .await;
    let clean_url = fleet.media.add("b.png", png(40, 40), "image/png");

    let (job, hit) = fleet.run("image", &url).await;
    let (_, clean) = fleet.run("image", &clean_url).await;

    assert_eq!(hit["status"], "completed");
    assert_eq!(hit["is_prohibited"], true);
    assert!(hit["reason"].as_str().unwrap().contains("underage"));
    assert_eq!(
        hit["categories"],
        json!({"ai_adult_general": false, "underage": true, "nsfw": false})
    );
    assert_eq!(fleet.app.deliveries_of(job).await, 1);
    assert!(
        hit.get("language").is_none(),
        "images have no language: {hit}"
    );
    assert_eq!(clean["is_prohibited"], false);
    assert_eq!(
        clean["categories"],
        json!({"ai_adult_general": false, "underage": false, "nsfw": false})
    );
}

#[tokio::test]
async fn a_re_encoded_image_matches_its_pdq_entry_and_nsfw_is_not_judged_when_the_check_is_off() {
    let fleet = media_fleet().await;
    let pdq = media_hash::pdq(&png(10, 10)).unwrap();
    fleet
        .bank(Some(fleet.key.account), "nsfw", None, Some(pdq))
        .await;
    let url = fleet.media.add("a.jpg", jpeg(10, 10), "image/jpeg");

    let (_, checked) = fleet.run("image", &url).await;
    fleet.set_nsfw_check(false).await;
    let (_, unchecked) = fleet.run("image", &url).await;

    assert_eq!(checked["is_prohibited"], true);
    assert_eq!(checked["categories"]["nsfw"], true);
    assert_eq!(unchecked["is_prohibited"], false, "{unchecked}");
    assert_eq!(
        unchecked["categories"],
        json!({"ai_adult_general": false, "underage": false})
    );
}

#[tokio::test]
async fn another_accounts_bank_entries_do_not_apply() {
    let fleet = media_fleet().await;
    let other = fleet.app.create_account().await;
    fleet
        .bank(
            Some(other),
            "underage",
            Some(media_hash::sha256(&png(10, 10))),
            None,
        )
        .await;
    let url = fleet.media.add("a.png", png(10, 10), "image/png");

    let (_, body) = fleet.run("image", &url).await;

    assert_eq!(body["is_prohibited"], false);
}

#[tokio::test]
async fn video_and_audio_match_by_exact_hash_including_custom_categories() {
    let fleet = media_fleet().await;
    let video = b"not really a video, but bytes all the same".to_vec();
    let audio = wav(8000, 8000);
    {
        let mut client = fleet.app.db.pool.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let piracy = db::custom_categories::NewCategory {
            name: "piracy",
            description: "Pirated films",
            keywords: &[],
            enabled: true,
        };
        db::custom_categories::insert(&tx, fleet.key.account, Actor::Operator, &piracy)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    fleet
        .bank(
            Some(fleet.key.account),
            "piracy",
            Some(media_hash::sha256(&video)),
            None,
        )
        .await;
    fleet
        .bank(
            None,
            "ai_adult_general",
            Some(media_hash::sha256(&audio)),
            None,
        )
        .await;
    let video_url = fleet.media.add("v.mp4", video, "video/mp4");
    let audio_url = fleet.media.add("a.wav", audio, "audio/wav");
    let quiet_url = fleet.media.add("q.wav", wav(8000, 4000), "audio/wav");

    let (_, video) = fleet.run("video", &video_url).await;
    let (_, audio) = fleet.run("audio", &audio_url).await;
    let (_, quiet) = fleet.run("audio", &quiet_url).await;

    assert_eq!(video["is_prohibited"], true);
    assert_eq!(
        video["categories"],
        json!({"ai_adult_general": false, "underage": false, "nsfw": false, "custom": {"piracy": true}})
    );
    assert_eq!(audio["is_prohibited"], true);
    assert_eq!(audio["categories"], json!({"custom": {"piracy": false}}));
    assert_eq!(quiet["is_prohibited"], false);
}

#[tokio::test]
async fn media_that_cannot_be_classified_fails_with_the_contract_code() {
    let fleet = media_fleet().await;
    let long = fleet
        .media
        .add("long.wav", wav(1000, 31 * 60 * 1000), "audio/wav");
    let garbage = fleet
        .media
        .add("g.png", b"not an image".to_vec(), "image/png");
    let to_metadata = fleet
        .media
        .url("/to?http://169.254.169.254/latest/meta-data/");
    let missing = fleet.media.url("/status/404");
    let huge = fleet
        .media
        .url(&format!("/zeros-chunked/{}", 100 * 1024 * 1024 + 1));

    for (kind, url, code) in [
        ("audio", long.as_str(), "MEDIA_TOO_LONG"),
        ("image", garbage.as_str(), "MEDIA_UNSUPPORTED"),
        ("image", to_metadata.as_str(), "URL_NOT_ALLOWED"),
        ("video", missing.as_str(), "MEDIA_UNREACHABLE"),
        ("video", huge.as_str(), "MEDIA_TOO_LARGE"),
    ] {
        let (job, body) = fleet.run(kind, url).await;
        assert_eq!(body["status"], "failed", "{url}: {body}");
        assert_eq!(body["error"]["code"], code, "{url}");
        assert!(body.get("is_prohibited").is_none_or(Value::is_null));
        let client = fleet.app.db.pool.get().await.unwrap();
        let sent: Vec<u8> = client
            .query_one("SELECT body FROM deliveries WHERE job_id = $1", &[&job])
            .await
            .unwrap()
            .get(0);
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(
            (sent["status"].as_str(), sent["error"]["code"].as_str()),
            (Some("failed"), Some(code))
        );
    }
}

#[tokio::test]
async fn a_transient_fetch_failure_puts_the_job_back_on_the_queue_until_it_succeeds() {
    let fleet = media_fleet().await;
    fleet.media.add("a.png", png(10, 10), "image/png");

    let (job, body) = fleet.run("image", &fleet.media.url("/flaky/2/a.png")).await;

    assert_eq!(body["status"], "completed", "{body}");
    assert_eq!(fleet.media.requests("/flaky/2/a.png"), 3);
    let progress: Value = fleet
        .app
        .get(&format!("/api/v1/job/{job}/progress"), &fleet.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (progress["stage"].as_str(), progress["attempts"].as_i64()),
        (Some("done"), Some(3))
    );
}

#[tokio::test]
async fn a_fetch_that_keeps_failing_fails_the_job_after_five_tries() {
    let fleet = media_fleet().await;

    let (_, body) = fleet.run("image", &fleet.media.url("/status/503")).await;

    assert_eq!(body["status"], "failed");
    assert_eq!(body["error"]["code"], "MEDIA_UNREACHABLE");
    assert_eq!(fleet.media.requests("/status/503"), 5);
}

/// Lines the worker binary logs at most from its start to the end of one junk MP3 job: its
/// startup and the job's own lines (its failure), whatever the file holds. Symphonia used to
/// warn once per junk header, two million lines for this file.
const MAX_LOG_LINES_PER_JOB: usize = 20;

#[tokio::test]
async fn an_mp3_of_junk_headers_fails_quickly_with_a_bounded_log() {
    let app = fleet_app().await;
    let key = app
        .account_with_key(Some(&[
            moderation_shared::domain::Scope::ModerateAudio,
            moderation_shared::domain::Scope::JobRead,
        ]))
        .await;
    app.lift_rate_limit(key.account).await;
    let media = MediaServer::start().await;
    // 20 good frames (so the demuxer estimates a length over the whole file), then 8 MB of
    // two million headers it rejects one by one while walking the packets.
    let url = media.add("junk.mp3", mp3_with_junk(20, 8 * 1024 * 1024), "audio/mpeg");
    let worker = WorkerProcess::spawn_logged(
        &app,
        &app.redis,
        moderation_shared::domain::Modality::Audio,
        &[("APP_ALLOW_PRIVATE_URLS", "true"), ("RUST_LOG", "info")],
    );

    let form = Form::new()
        .text("audio", url.clone())
        .text("webhook_url", "https://127.0.0.1:9/hook");
    let response = app.submit("audio", &key, form).await;
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    let job = body["job_id"].as_str().unwrap().parse().unwrap();
    let body = app.finished_job(&key, job).await;

    assert_eq!(
        (body["status"].as_str(), body["error"]["code"].as_str()),
        (Some("failed"), Some("MEDIA_TOO_LONG")),
        "{body}"
    );
    let log = worker.log();
    let lines = log.lines().count();
    let head: Vec<&str> = log.lines().take(MAX_LOG_LINES_PER_JOB + 1).collect();
    assert!(
        lines <= MAX_LOG_LINES_PER_JOB,
        "{lines} lines, starting:\n{}",
        head.join("\n")
    );
}
