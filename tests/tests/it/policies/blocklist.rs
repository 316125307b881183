//! `GET|POST|DELETE /api/v1/blocklist`.

use moderation_tests::{assert_error, spawn_app, TestApp, TestKey};
use reqwest::Method;
use serde_json::{json, Value};

use super::{send, settings_key, settings_stamp};

const PATH: &str = "/api/v1/blocklist";

async fn add(app: &TestApp, key: &TestKey, terms: Value) -> reqwest::Response {
    send(
        app,
        Method::POST,
        PATH,
        key,
        Some(&json!({ "terms": terms })),
    )
    .await
}

async fn remove(app: &TestApp, key: &TestKey, terms: Value) -> reqwest::Response {
    send(
        app,
        Method::DELETE,
        PATH,
        key,
        Some(&json!({ "terms": terms })),
    )
    .await
}

async fn whole_list(response: reqwest::Response) -> Value {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

async fn current(app: &TestApp, key: &TestKey) -> Value {
    whole_list(send(app, Method::GET, PATH, key, None).await).await
}

fn numbered(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|n| format!("{prefix}{n:05}")).collect()
}

#[tokio::test]
async fn adding_terms_answers_the_whole_list_in_order() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    assert_eq!(current(&app, &key).await, json!({"terms": []}));

    let first = whole_list(add(&app, &key, json!(["zebra", "apple"])).await).await;
    let second = whole_list(add(&app, &key, json!(["  mango ", "mango", "Apple"])).await).await;

    assert_eq!(first, json!({"terms": ["apple", "zebra"]}));
    assert_eq!(
        second,
        json!({"terms": ["Apple", "apple", "mango", "zebra"]})
    );
    assert_eq!(current(&app, &key).await, second);
}

#[tokio::test]
async fn adding_a_term_already_present_is_fine_and_changes_nothing() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    whole_list(add(&app, &key, json!(["apple"])).await).await;
    assert_eq!(settings_stamp(&app, key.account).await, 1);

    let again = whole_list(add(&app, &key, json!(["apple"])).await).await;

    assert_eq!(again, json!({"terms": ["apple"]}));
    assert_eq!(settings_stamp(&app, key.account).await, 1);
}

#[tokio::test]
async fn removing_terms_answers_the_rest_and_ignores_absent_ones() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    whole_list(add(&app, &key, json!(["apple", "mango", "zebra"])).await).await;

    let removed = whole_list(remove(&app, &key, json!(["mango", "kiwi"])).await).await;
    let version = settings_stamp(&app, key.account).await;
    let nothing = whole_list(remove(&app, &key, json!(["kiwi"])).await).await;

    assert_eq!(removed, json!({"terms": ["apple", "zebra"]}));
    assert_eq!(version, 2);
    assert_eq!(nothing, removed);
    assert_eq!(settings_stamp(&app, key.account).await, 2);
    assert_eq!(current(&app, &key).await, removed);
}

#[tokio::test]
async fn a_call_takes_1_to_100_terms() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;

    let hundred = add(&app, &key, json!(numbered("t", 100))).await;
    let hundred_and_one = add(&app, &key, json!(numbered("u", 101))).await;
    let none = add(&app, &key, json!([])).await;
    let remove_hundred_and_one = remove(&app, &key, json!(numbered("t", 101))).await;
    let remove_none = remove(&app, &key, json!([])).await;

    let hundred = whole_list(hundred).await;
    assert_eq!(hundred["terms"].as_array().unwrap().len(), 100);
    for refused in [hundred_and_one, none, remove_hundred_and_one, remove_none] {
        let body = assert_error(refused, 400, "INVALID_REQUEST").await;
        assert!(
            body["message"].as_str().unwrap().contains("1 to 100"),
            "{body}"
        );
    }
    assert_eq!(current(&app, &key).await, hundred);
    let removed = whole_list(remove(&app, &key, json!(numbered("t", 100))).await).await;
    assert_eq!(removed, json!({"terms": []}));
}

#[tokio::test]
async fn a_term_is_1_to_100_characters_without_control_characters() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    // Multi-byte characters: the limit counts characters, not bytes.
    let longest = "ß".repeat(100);

    let accepted = whole_list(add(&app, &key, json!([longest])).await).await;

    assert_eq!(accepted, json!({"terms": [longest]}));
    for term in [
        json!("ß".repeat(101)),
        json!(""),
        json!("   "),
        json!("tab\tinside"),
        json!("line\nbreak"),
        json!(7),
        json!(null),
    ] {
        let body = assert_error(add(&app, &key, json!([term])).await, 400, "INVALID_REQUEST").await;
        assert!(
            body["message"].as_str().unwrap().contains("terms")
                || body["message"].as_str().unwrap().contains("invalid type"),
            "{term}: {body}"
        );
        let body = assert_error(
            remove(&app, &key, json!([term])).await,
            400,
            "INVALID_REQUEST",
        )
        .await;
        assert!(!body["message"].as_str().unwrap().is_empty());
    }
    assert_eq!(current(&app, &key).await, accepted);
}

#[tokio::test]
async fn bodies_are_strict() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;

    let bodies = [
        json!({"terms": ["a"], "mode": "replace"}),
        json!({"terms": null}),
        json!({"terms": "a"}),
        json!({}),
        json!(["a"]),
    ];

    for body in bodies {
        for method in [Method::POST, Method::DELETE] {
            let response = send(&app, method.clone(), PATH, &key, Some(&body)).await;
            assert_error(response, 400, "INVALID_REQUEST").await;
        }
    }
    let not_json = app
        .client
        .post(app.url(PATH))
        .bearer_auth(&key.key)
        .body("terms=a")
        .send()
        .await
        .unwrap();
    assert_error(not_json, 415, "UNSUPPORTED_MEDIA_TYPE").await;
    assert_eq!(current(&app, &key).await, json!({"terms": []}));
}

#[tokio::test]
async fn an_account_holds_at_most_10000_terms() {
    let app = spawn_app().await;
    let key = settings_key(&app).await;
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO blocklist_terms (account_id, term) \
             SELECT $1, 'seed' || lpad(n::text, 5, '0') FROM generate_series(1, 9950) AS n",
            &[&key.account.0],
        )
        .await
        .unwrap();

    let to_the_limit = add(&app, &key, json!(numbered("new", 50))).await;
    let version = settings_stamp(&app, key.account).await;
    let one_over = add(&app, &key, json!(["one more"])).await;
    let present_at_the_limit = add(&app, &key, json!(["seed00001", "new00049"])).await;

    let full = whole_list(to_the_limit).await;
    assert_eq!(full["terms"].as_array().unwrap().len(), 10_000);
    let body = assert_error(one_over, 409, "CONFLICT").await;
    assert!(
        body["message"].as_str().unwrap().contains("10000"),
        "{body}"
    );
    assert_eq!(whole_list(present_at_the_limit).await, full);
    assert_eq!(settings_stamp(&app, key.account).await, version);
    whole_list(remove(&app, &key, json!(["seed00001"])).await).await;
    let after_room = whole_list(add(&app, &key, json!(["one more"])).await).await;
    assert_eq!(after_room["terms"].as_array().unwrap().len(), 10_000);
}

#[tokio::test]
async fn accounts_never_see_or_change_each_others_terms() {
    let app = spawn_app().await;
    let owner = settings_key(&app).await;
    let stranger = settings_key(&app).await;
    whole_list(add(&app, &owner, json!(["apple"])).await).await;

    let stranger_view = current(&app, &stranger).await;
    let stranger_removal = whole_list(remove(&app, &stranger, json!(["apple"])).await).await;

    assert_eq!(stranger_view, json!({"terms": []}));
    assert_eq!(stranger_removal, json!({"terms": []}));
    assert_eq!(current(&app, &owner).await, json!({"terms": ["apple"]}));
    assert_eq!(settings_stamp(&app, stranger.account).await, 0);
}
