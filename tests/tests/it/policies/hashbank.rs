//! `modctl hashbank add`, run as the operator runs it.

use moderation_shared::{db::hash_bank, domain::AccountId, media_hash};
use moderation_tests::{media::png, receiver::tempfile_path::write_bytes, spawn_app, TestApp};
use serde_json::Value;

use super::{create_category, settings_key};
use crate::modctl::modctl;

async fn entry_count(app: &TestApp) -> i64 {
    let client = app.db.pool.get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM hash_bank", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn hashbank_add_with_a_png_file_stores_its_sha256_and_pdq() {
    let app = spawn_app().await;
    let org = app.create_account().await;
    let bytes = png(20, 20);
    let file = write_bytes(&bytes, "png");
    let org_id = org.to_string();

    let (ok, out, stderr) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--org",
            &org_id,
            "--category",
            "nsfw",
            "--file",
            file.path().to_str().unwrap(),
        ],
    );

    assert!(ok, "{stderr}");
    let sha256 = media_hash::sha256(&bytes);
    let pdq = media_hash::pdq(&bytes).unwrap();
    assert_eq!(out["category"], "nsfw");
    assert_eq!(out["sha256"], hex::encode(sha256));
    assert_eq!(out["pdq"], hex::encode(pdq));
    assert!(out["entry_id"]
        .as_str()
        .unwrap()
        .parse::<uuid::Uuid>()
        .is_ok());
    let mut fields: Vec<&String> = out.as_object().unwrap().keys().collect();
    fields.sort_unstable();
    assert_eq!(fields, ["category", "entry_id", "pdq", "sha256"]);
    let client = app.db.pool.get().await.unwrap();
    let found = hash_bank::categories_for_sha256(&client, org, &sha256)
        .await
        .unwrap();
    assert_eq!(found, ["nsfw"]);
    let images = hash_bank::pdq_entries(&client, org).await.unwrap();
    assert_eq!(images, [("nsfw".to_owned(), pdq)]);
    let elsewhere = hash_bank::categories_for_sha256(&client, AccountId::new(), &sha256)
        .await
        .unwrap();
    assert!(elsewhere.is_empty(), "an account entry is not global");
}

#[tokio::test]
async fn hashbank_add_with_a_file_that_is_no_image_stores_only_its_sha256() {
    let app = spawn_app().await;
    let bytes = b"not a picture, just some text".to_vec();
    let file = write_bytes(&bytes, "txt");

    let (ok, out, stderr) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--global",
            "--category",
            "underage",
            "--file",
            file.path().to_str().unwrap(),
        ],
    );

    assert!(ok, "{stderr}");
    assert_eq!(out["sha256"], hex::encode(media_hash::sha256(&bytes)));
    assert_eq!(out["pdq"], Value::Null);
    assert!(stderr.contains("no PDQ hash"), "{stderr}");
    let client = app.db.pool.get().await.unwrap();
    let found =
        hash_bank::categories_for_sha256(&client, AccountId::new(), &media_hash::sha256(&bytes))
            .await
            .unwrap();
    assert_eq!(
        found,
        ["underage"],
        "a global entry is seen by every account"
    );
}

#[tokio::test]
async fn hashbank_add_takes_a_hex_hash_and_adding_it_again_finds_the_same_entry() {
    let app = spawn_app().await;
    let pdq = "AB".repeat(32);
    let sha256 = "0f".repeat(32);

    let (ok, by_pdq, stderr) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--global",
            "--category",
            "ai_adult_general",
            "--pdq",
            &pdq,
        ],
    );
    assert!(ok, "{stderr}");
    let (ok, by_sha, stderr) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--global",
            "--category",
            "nsfw",
            "--sha256",
            &sha256,
        ],
    );
    assert!(ok, "{stderr}");
    let (ok, again, stderr) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--global",
            "--category",
            "nsfw",
            "--sha256",
            &sha256,
        ],
    );
    assert!(ok, "{stderr}");

    assert_eq!(by_pdq["pdq"], "ab".repeat(32));
    assert_eq!(by_pdq["sha256"], Value::Null);
    assert_eq!(by_pdq["category"], "ai_adult_general");
    assert_eq!(by_sha["sha256"], sha256);
    assert_eq!(by_sha["pdq"], Value::Null);
    assert_eq!(again, by_sha);
    assert_eq!(entry_count(&app).await, 2);
}

#[tokio::test]
async fn hashbank_add_takes_a_custom_category_of_the_org_only() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    create_category(&app, &key, "gambling").await;
    let stranger = app.create_account().await;
    let sha256 = "12".repeat(32);
    let org_id = key.account.to_string();
    let stranger_id = stranger.to_string();

    let (ok, own, stderr) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--org",
            &org_id,
            "--category",
            "gambling",
            "--sha256",
            &sha256,
        ],
    );
    let (global_ok, global, global_err) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--global",
            "--category",
            "gambling",
            "--sha256",
            &sha256,
        ],
    );
    let (stranger_ok, stranger_out, stranger_err) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--org",
            &stranger_id,
            "--category",
            "gambling",
            "--sha256",
            &sha256,
        ],
    );

    assert!(ok, "{stderr}");
    assert_eq!(own["category"], "gambling");
    assert!(!global_ok && global == Value::Null);
    assert!(global_err.contains("global"), "{global_err}");
    assert!(!stranger_ok && stranger_out == Value::Null);
    assert!(stranger_err.contains("gambling"), "{stranger_err}");
    assert_eq!(entry_count(&app).await, 1);
}

#[tokio::test]
async fn hashbank_add_fails_clearly_on_bad_input() {
    let app = spawn_app().await;
    let org = app.create_account().await.to_string();
    let good = "ab".repeat(32);
    let short = "ab".repeat(31) + "a";
    let long = good.clone() + "a";
    let not_hex = "zz".repeat(32);
    let unknown_org = AccountId::new().to_string();
    let missing_file = std::env::temp_dir()
        .join(format!("absent-{}.png", uuid::Uuid::new_v4()))
        .to_str()
        .unwrap()
        .to_owned();

    let cases: Vec<Vec<&str>> = vec![
        vec![
            "--org",
            &org,
            "--global",
            "--category",
            "nsfw",
            "--pdq",
            &good,
        ],
        vec!["--category", "nsfw", "--pdq", &good],
        vec!["--global", "--category", "nsfw"],
        vec![
            "--global",
            "--category",
            "nsfw",
            "--pdq",
            &good,
            "--sha256",
            &good,
        ],
        vec!["--global", "--pdq", &good],
        vec!["--global", "--category", "nsfw", "--pdq", &short],
        vec!["--global", "--category", "nsfw", "--sha256", &long],
        vec!["--global", "--category", "nsfw", "--sha256", &not_hex],
        vec!["--global", "--category", "Not A Slug", "--sha256", &good],
        vec![
            "--org",
            "not-a-uuid",
            "--category",
            "nsfw",
            "--sha256",
            &good,
        ],
        vec![
            "--org",
            &unknown_org,
            "--category",
            "nsfw",
            "--sha256",
            &good,
        ],
        vec!["--org", &org, "--category", "nsfw", "--file", &missing_file],
    ];

    for case in cases {
        let mut args = vec!["hashbank", "add"];
        args.extend(case.iter());
        let (ok, out, stderr) = modctl(&app, &args);
        assert!(!ok, "{case:?} should fail");
        assert_eq!(out, Value::Null, "{case:?} printed JSON on failure");
        assert!(!stderr.trim().is_empty(), "{case:?} printed no message");
    }
    assert_eq!(entry_count(&app).await, 0);
    let (ok, _, stderr) = modctl(
        &app,
        &[
            "hashbank",
            "add",
            "--org",
            &org,
            "--category",
            "nsfw",
            "--pdq",
            &good,
        ],
    );
    assert!(ok, "the same command with good input works: {stderr}");
    assert_eq!(entry_count(&app).await, 1);
}
