//! The reads a worker makes of an account's policy, and the hash bank store.

use moderation_shared::{
    db::{
        accounts::{self, PlanUpdate, SettingsStamp},
        blocklist, custom_categories,
        hash_bank::{self, NewEntry},
    },
    domain::AccountId,
};
use moderation_tests::spawn_app;
use reqwest::Method;
use serde_json::json;

use super::{send, settings_key};

#[tokio::test]
async fn the_worker_reads_the_enabled_categories_by_name() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let other = settings_key(&app).await;
    for (name, enabled) in [("zeta", true), ("off", false), ("alpha", true)] {
        let body = json!({
            "name": name,
            "description": format!("About {name}."),
            "keywords": [format!("{name}word")],
            "enabled": enabled,
        });
        let response = send(
            &app,
            Method::POST,
            "/api/v1/custom-categories",
            &key,
            Some(&body),
        );
        assert_eq!(response.await.status(), 201);
    }
    let client = app.db.pool.get().await.unwrap();

    let enabled = custom_categories::enabled(&client, key.account)
        .await
        .unwrap();
    let of_other = custom_categories::enabled(&client, other.account)
        .await
        .unwrap();

    let seen: Vec<(&str, &str, Vec<String>)> = enabled
        .iter()
        .map(|c| (c.name.as_str(), c.description.as_str(), c.keywords.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            ("alpha", "About alpha.", vec!["alphaword".to_owned()]),
            ("zeta", "About zeta.", vec!["zetaword".to_owned()]),
        ]
    );
    assert!(of_other.is_empty());
}

#[tokio::test]
async fn the_worker_reads_the_accounts_own_terms_only() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let other = settings_key(&app).await;
    let body = json!({"terms": ["beta", "alpha"]});
    let response = send(&app, Method::POST, "/api/v1/blocklist", &key, Some(&body)).await;
    assert_eq!(response.status(), 200);
    let client = app.db.pool.get().await.unwrap();

    let terms = blocklist::terms(&client, key.account).await.unwrap();
    let of_other = blocklist::terms(&client, other.account).await.unwrap();

    assert_eq!(terms, ["alpha", "beta"]);
    assert!(of_other.is_empty());
}

#[tokio::test]
async fn the_settings_stamp_follows_the_nsfw_switch_and_every_policy_change() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let client = app.db.pool.get().await.unwrap();
    let fresh = accounts::settings_stamp(&client, key.account)
        .await
        .unwrap();

    let update = PlanUpdate {
        nsfw_check: Some(false),
        ..PlanUpdate::default()
    };
    accounts::update_plan(
        &client,
        moderation_shared::db::audit_events::Actor::Operator,
        key.account,
        &update,
    )
    .await
    .unwrap();
    let body = json!({"terms": ["alpha"]});
    send(&app, Method::POST, "/api/v1/blocklist", &key, Some(&body)).await;
    let changed = accounts::settings_stamp(&client, key.account)
        .await
        .unwrap();
    let unknown = accounts::settings_stamp(&client, AccountId::new())
        .await
        .unwrap();

    assert_eq!(
        fresh,
        Some(SettingsStamp {
            nsfw_check: true,
            settings_stamp: 0
        })
    );
    assert_eq!(
        changed,
        Some(SettingsStamp {
            nsfw_check: false,
            settings_stamp: 1
        })
    );
    assert_eq!(unknown, None);
}

fn entry(account: Option<AccountId>, category: &str, sha256: u8, pdq: Option<u8>) -> NewEntry {
    NewEntry {
        account,
        category: category.to_owned(),
        sha256: Some([sha256; 32]),
        pdq: pdq.map(|b| [b; 32]),
    }
}

#[tokio::test]
async fn hash_lookups_see_the_global_bank_and_the_accounts_own_entries_only() {
    let app = spawn_app().await;
    let mine = app.create_account().await;
    let theirs = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    for new in [
        entry(None, "nsfw", 1, Some(0xA0)),
        entry(Some(mine), "underage", 1, None),
        entry(Some(theirs), "gambling", 1, Some(0xB0)),
        entry(Some(mine), "ai_adult_general", 2, Some(0xC0)),
    ] {
        hash_bank::insert(&client, &new).await.unwrap();
    }

    let for_me = hash_bank::categories_for_sha256(&client, mine, &[1; 32])
        .await
        .unwrap();
    let for_them = hash_bank::categories_for_sha256(&client, theirs, &[1; 32])
        .await
        .unwrap();
    let unknown = hash_bank::categories_for_sha256(&client, mine, &[9; 32])
        .await
        .unwrap();
    let mut my_pdq = hash_bank::pdq_entries(&client, mine).await.unwrap();
    my_pdq.sort();
    let mut their_pdq = hash_bank::pdq_entries(&client, theirs).await.unwrap();
    their_pdq.sort();

    assert_eq!(for_me, ["nsfw", "underage"]);
    assert_eq!(for_them, ["gambling", "nsfw"]);
    assert!(unknown.is_empty());
    assert_eq!(
        my_pdq,
        [
            ("ai_adult_general".to_owned(), [0xC0; 32]),
            ("nsfw".to_owned(), [0xA0; 32]),
        ]
    );
    assert_eq!(
        their_pdq,
        [
            ("gambling".to_owned(), [0xB0; 32]),
            ("nsfw".to_owned(), [0xA0; 32]),
        ]
    );
}

#[tokio::test]
async fn storing_an_identical_entry_again_finds_the_first() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    let first = hash_bank::insert(&client, &entry(None, "nsfw", 1, None))
        .await
        .unwrap();

    let again = hash_bank::insert(&client, &entry(None, "nsfw", 1, None))
        .await
        .unwrap();
    let other_category = hash_bank::insert(&client, &entry(None, "underage", 1, None))
        .await
        .unwrap();
    let own = hash_bank::insert(&client, &entry(Some(account), "nsfw", 1, None))
        .await
        .unwrap();
    let with_pdq = hash_bank::insert(&client, &entry(None, "nsfw", 1, Some(3)))
        .await
        .unwrap();

    assert_eq!(again, first);
    assert_eq!(first.account, None);
    assert_eq!(first.sha256, Some([1; 32]));
    assert_eq!(first.pdq, None);
    assert_ne!(other_category.id, first.id);
    assert_ne!(own.id, first.id);
    assert_eq!(own.account, Some(account));
    assert_ne!(with_pdq.id, first.id);
    let count: i64 = client
        .query_one("SELECT count(*) FROM hash_bank", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 4);
}

#[tokio::test]
async fn an_entry_without_any_hash_is_refused_by_the_table() {
    let app = spawn_app().await;
    let client = app.db.pool.get().await.unwrap();

    let refused = hash_bank::insert(
        &client,
        &NewEntry {
            account: None,
            category: "nsfw".to_owned(),
            sha256: None,
            pdq: None,
        },
    )
    .await;

    assert!(refused.is_err());
}
