//! `GET|POST /api/v1/custom-categories`, `PATCH|DELETE /api/v1/custom-categories/{id}`.

use moderation_tests::{assert_error, spawn_app, TestApp, TestKey};
use reqwest::Method;
use serde_json::{json, Value};

use super::{create_category, send, settings_key, settings_stamp};

const COLLECTION: &str = "/api/v1/custom-categories";

async fn post(app: &TestApp, key: &TestKey, body: Value) -> reqwest::Response {
    send(app, Method::POST, COLLECTION, key, Some(&body)).await
}

async fn patch(app: &TestApp, key: &TestKey, id: &str, body: Value) -> reqwest::Response {
    let path = format!("{COLLECTION}/{id}");
    send(app, Method::PATCH, &path, key, Some(&body)).await
}

async fn delete(app: &TestApp, key: &TestKey, id: &str) -> reqwest::Response {
    send(
        app,
        Method::DELETE,
        &format!("{COLLECTION}/{id}"),
        key,
        None,
    )
    .await
}

async fn listed(app: &TestApp, key: &TestKey) -> Vec<Value> {
    let response = send(app, Method::GET, COLLECTION, key, None).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["categories"].as_array().unwrap().clone()
}

fn is_millisecond_utc(value: &Value) -> bool {
    let text = value.as_str().unwrap_or_default();
    text.len() == 24 && text.ends_with('Z') && text.as_bytes()[19] == b'.'
}

#[tokio::test]
async fn creating_a_category_answers_201_with_it_and_the_list_shows_it() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;

    let response = post(
        &app,
        &key,
        json!({
            "name": "gambling",
            "description": "Promotes betting or casinos.",
            "keywords": ["casino", "  sportsbook  ", "casino"]
        }),
    )
    .await;

    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let mut fields: Vec<&str> = created
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "created_at",
            "description",
            "enabled",
            "id",
            "keywords",
            "name"
        ]
    );
    assert!(created["id"]
        .as_str()
        .unwrap()
        .parse::<uuid::Uuid>()
        .is_ok());
    assert_eq!(created["name"], "gambling");
    assert_eq!(created["description"], "Promotes betting or casinos.");
    assert_eq!(created["keywords"], json!(["casino", "sportsbook"]));
    assert_eq!(created["enabled"], true);
    assert!(is_millisecond_utc(&created["created_at"]), "{created}");
    assert_eq!(listed(&app, &key).await, vec![created]);
}

#[tokio::test]
async fn a_category_may_start_disabled_and_keywords_default_to_none() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;

    let response = post(
        &app,
        &key,
        json!({"name": "crypto", "description": "Crypto schemes.", "enabled": false}),
    )
    .await;

    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    assert_eq!(created["enabled"], false);
    assert_eq!(created["keywords"], json!([]));
}

#[tokio::test]
async fn the_list_is_ordered_by_name_and_empty_for_a_new_account() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    assert!(listed(&app, &key).await.is_empty());

    for name in ["zeta", "alpha", "m_9"] {
        create_category(&app, &key, name).await;
    }

    let names: Vec<Value> = listed(&app, &key)
        .await
        .iter()
        .map(|c| c["name"].clone())
        .collect();
    assert_eq!(names, [json!("alpha"), json!("m_9"), json!("zeta")]);
}

#[tokio::test]
async fn a_duplicate_name_is_409_and_another_account_may_use_it() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let other = settings_key(&app).await;
    create_category(&app, &key, "gambling").await;

    let duplicate = post(
        &app,
        &key,
        json!({"name": "gambling", "description": "Again."}),
    )
    .await;
    let elsewhere = post(
        &app,
        &other,
        json!({"name": "gambling", "description": "Mine."}),
    )
    .await;

    let body = assert_error(duplicate, 409, "CONFLICT").await;
    assert!(body["message"].as_str().unwrap().contains("gambling"));
    assert_eq!(elsewhere.status(), 201);
    assert_eq!(listed(&app, &key).await.len(), 1);
}

#[tokio::test]
async fn an_account_may_have_twenty_categories_and_the_twenty_first_is_409() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    for n in 0..19 {
        create_category(&app, &key, &format!("category_{n:02}")).await;
    }

    let twentieth = post(
        &app,
        &key,
        json!({"name": "category_19", "description": "The last one."}),
    )
    .await;
    let twenty_first = post(
        &app,
        &key,
        json!({"name": "category_20", "description": "One too many."}),
    )
    .await;

    assert_eq!(twentieth.status(), 201);
    let body = assert_error(twenty_first, 409, "CONFLICT").await;
    assert!(
        body["message"].as_str().unwrap().contains("at most 20"),
        "{body}"
    );
    assert_eq!(listed(&app, &key).await.len(), 20);
    let first = listed(&app, &key).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(delete(&app, &key, &first).await.status(), 204);
    let after_delete = post(
        &app,
        &key,
        json!({"name": "category_20", "description": "Room again."}),
    )
    .await;
    assert_eq!(after_delete.status(), 201);
}

#[tokio::test]
async fn a_name_is_a_slug_of_1_to_64_characters() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let longest = "a".repeat(64);

    let accepted = post(&app, &key, json!({"name": longest, "description": "Ok."})).await;

    assert_eq!(accepted.status(), 201);
    let refused = [
        "a".repeat(65),
        String::new(),
        "Gambling".to_owned(),
        "gam-bling".to_owned(),
        "gam bling".to_owned(),
        "gämbling".to_owned(),
    ];
    for name in refused {
        let response = post(&app, &key, json!({"name": name, "description": "No."})).await;
        let body = assert_error(response, 400, "INVALID_REQUEST").await;
        assert!(
            body["message"].as_str().unwrap().contains("name"),
            "{name:?}: {body}"
        );
    }
    assert_eq!(listed(&app, &key).await.len(), 1);
}

#[tokio::test]
async fn a_description_is_1_to_2000_characters() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    // Two-byte characters: the limit counts characters, not bytes.
    let longest = "é".repeat(2000);

    let accepted = post(&app, &key, json!({"name": "a", "description": longest})).await;
    let with_lines = post(
        &app,
        &key,
        json!({"name": "b", "description": "Line one.\n\tLine two."}),
    )
    .await;

    assert_eq!(accepted.status(), 201);
    assert_eq!(with_lines.status(), 201);
    for description in [
        "é".repeat(2001),
        String::new(),
        "   ".to_owned(),
        "bell\u{7}".to_owned(),
    ] {
        let response = post(&app, &key, json!({"name": "c", "description": description})).await;
        let body = assert_error(response, 400, "INVALID_REQUEST").await;
        assert!(body["message"].as_str().unwrap().contains("description"));
    }
    assert_eq!(listed(&app, &key).await.len(), 2);
}

#[tokio::test]
async fn keywords_are_at_most_100_of_1_to_100_characters_each() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let hundred: Vec<String> = (0..100).map(|n| format!("word{n}")).collect();
    let mut hundred_and_one = hundred.clone();
    hundred_and_one.push("word100".to_owned());
    let longest = "k".repeat(100);

    let many = post(
        &app,
        &key,
        json!({"name": "a", "description": "A.", "keywords": hundred}),
    )
    .await;
    let long = post(
        &app,
        &key,
        json!({"name": "b", "description": "B.", "keywords": [longest]}),
    )
    .await;

    assert_eq!(many.status(), 201);
    assert_eq!(long.status(), 201);
    for keywords in [
        json!(hundred_and_one),
        json!(["k".repeat(101)]),
        json!([""]),
        json!(["  "]),
        json!(["tab\there"]),
        json!([5]),
    ] {
        let response = post(
            &app,
            &key,
            json!({"name": "c", "description": "C.", "keywords": keywords}),
        )
        .await;
        let body = assert_error(response, 400, "INVALID_REQUEST").await;
        assert!(
            body["message"].as_str().unwrap().contains("keywords")
                || body["message"].as_str().unwrap().contains("invalid type"),
            "{keywords}: {body}"
        );
    }
    assert_eq!(listed(&app, &key).await.len(), 2);
}

#[tokio::test]
async fn bodies_are_strict_unknown_properties_and_nulls_are_400() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let created = create_category(&app, &key, "gambling").await;
    let id = created["id"].as_str().unwrap();

    let creates = [
        json!({"name": "x", "description": "X.", "colour": "red"}),
        json!({"name": "x", "description": "X.", "enabled": null}),
        json!({"name": "x", "description": "X.", "keywords": null}),
        json!({"name": "x", "description": "X.", "enabled": "yes"}),
        json!({"description": "X."}),
        json!({"name": "x"}),
        json!(["x"]),
    ];
    let changes = [
        json!({"enabled": false, "name": "renamed"}),
        json!({"description": null}),
        json!({}),
        json!({"keywords": "casino"}),
    ];

    for body in creates {
        let response = post(&app, &key, body.clone()).await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
    for body in changes {
        let response = patch(&app, &key, id, body.clone()).await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
    let not_json = app
        .client
        .post(app.url(COLLECTION))
        .bearer_auth(&key.key)
        .body("name=x")
        .send()
        .await
        .unwrap();
    assert_error(not_json, 415, "UNSUPPORTED_MEDIA_TYPE").await;
    assert_eq!(listed(&app, &key).await, vec![created]);
}

#[tokio::test]
async fn patch_changes_only_the_given_properties() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let created = post(
        &app,
        &key,
        json!({"name": "gambling", "description": "Old.", "keywords": ["casino"]}),
    )
    .await
    .json::<Value>()
    .await
    .unwrap();
    let id = created["id"].as_str().unwrap();

    let described = patch(&app, &key, id, json!({"description": "New."})).await;
    let disabled = patch(&app, &key, id, json!({"enabled": false})).await;
    let emptied = patch(&app, &key, id, json!({"keywords": []})).await;

    assert_eq!(described.status(), 200);
    let described: Value = described.json().await.unwrap();
    assert_eq!(described["description"], "New.");
    assert_eq!(described["keywords"], json!(["casino"]));
    assert_eq!(described["enabled"], true);
    let disabled: Value = disabled.json().await.unwrap();
    assert_eq!(disabled["enabled"], false);
    assert_eq!(disabled["description"], "New.");
    let emptied: Value = emptied.json().await.unwrap();
    assert_eq!(emptied["keywords"], json!([]));
    assert_eq!(emptied["enabled"], false);
    assert_eq!(emptied["name"], "gambling");
    assert_eq!(emptied["id"], created["id"]);
    assert_eq!(emptied["created_at"], created["created_at"]);
    assert_eq!(listed(&app, &key).await, vec![emptied]);
}

#[tokio::test]
async fn patch_checks_the_same_limits_as_create() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let created = create_category(&app, &key, "gambling").await;
    let id = created["id"].as_str().unwrap();
    let hundred: Vec<String> = (0..100).map(|n| format!("w{n}")).collect();
    let mut hundred_and_one = hundred.clone();
    hundred_and_one.push("w100".to_owned());

    let at_limits = patch(
        &app,
        &key,
        id,
        json!({"description": "d".repeat(2000), "keywords": hundred}),
    )
    .await;
    let long_description = patch(&app, &key, id, json!({"description": "d".repeat(2001)})).await;
    let many_keywords = patch(&app, &key, id, json!({"keywords": hundred_and_one})).await;
    let long_keyword = patch(&app, &key, id, json!({"keywords": ["k".repeat(101)]})).await;

    assert_eq!(at_limits.status(), 200);
    assert_error(long_description, 400, "INVALID_REQUEST").await;
    assert_error(many_keywords, 400, "INVALID_REQUEST").await;
    assert_error(long_keyword, 400, "INVALID_REQUEST").await;
    let stored = &listed(&app, &key).await[0];
    assert_eq!(stored["description"], "d".repeat(2000));
    assert_eq!(stored["keywords"].as_array().unwrap().len(), 100);
}

#[tokio::test]
async fn delete_answers_204_and_frees_the_name() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let created = create_category(&app, &key, "gambling").await;
    let id = created["id"].as_str().unwrap();

    let deleted = delete(&app, &key, id).await;

    assert_eq!(deleted.status(), 204);
    assert!(deleted.text().await.unwrap().is_empty());
    assert!(listed(&app, &key).await.is_empty());
    assert_error(delete(&app, &key, id).await, 404, "NOT_FOUND").await;
    assert_error(
        patch(&app, &key, id, json!({"enabled": true})).await,
        404,
        "NOT_FOUND",
    )
    .await;
    create_category(&app, &key, "gambling").await;
}

#[tokio::test]
async fn another_accounts_category_is_404_and_a_malformed_id_is_400() {
    let app = spawn_app().await;
    let owner = settings_key(&app).await;
    let stranger = settings_key(&app).await;
    let created = create_category(&app, &owner, "gambling").await;
    let id = created["id"].as_str().unwrap();
    let unknown = uuid::Uuid::new_v4().to_string();

    let changed = patch(&app, &stranger, id, json!({"enabled": false})).await;
    let deleted = delete(&app, &stranger, id).await;
    let unknown_changed = patch(&app, &owner, &unknown, json!({"enabled": false})).await;
    let malformed_changed = patch(&app, &owner, "not-a-uuid", json!({"enabled": false})).await;
    let malformed_deleted = delete(&app, &owner, "12345").await;

    assert_error(changed, 404, "NOT_FOUND").await;
    assert_error(deleted, 404, "NOT_FOUND").await;
    assert_error(unknown_changed, 404, "NOT_FOUND").await;
    assert_error(malformed_changed, 400, "INVALID_REQUEST").await;
    assert_error(malformed_deleted, 400, "INVALID_REQUEST").await;
    assert!(listed(&app, &stranger).await.is_empty());
    assert_eq!(listed(&app, &owner).await, vec![created]);
    assert_eq!(settings_stamp(&app, stranger.account).await, 0);
}

#[tokio::test]
async fn every_change_bumps_the_settings_stamp_and_a_refused_one_does_not() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    assert_eq!(settings_stamp(&app, key.account).await, 0);

    let created = create_category(&app, &key, "gambling").await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(settings_stamp(&app, key.account).await, 1);

    let duplicate = post(&app, &key, json!({"name": "gambling", "description": "X."})).await;
    assert_error(duplicate, 409, "CONFLICT").await;
    let invalid = patch(&app, &key, id, json!({"description": ""})).await;
    assert_error(invalid, 400, "INVALID_REQUEST").await;
    let unknown = uuid::Uuid::new_v4().to_string();
    let missing = patch(&app, &key, &unknown, json!({"enabled": false})).await;
    assert_error(missing, 404, "NOT_FOUND").await;
    assert_eq!(settings_stamp(&app, key.account).await, 1);

    assert_eq!(
        patch(&app, &key, id, json!({"enabled": false}))
            .await
            .status(),
        200
    );
    assert_eq!(settings_stamp(&app, key.account).await, 2);

    assert_eq!(delete(&app, &key, id).await.status(), 204);
    assert_eq!(settings_stamp(&app, key.account).await, 3);
}
