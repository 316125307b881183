use moderation_tests::{
    registry::{check_body, email_hash, report_body},
    spawn_app,
};
use serde_json::{json, Value};

use super::assert_invalid;

const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn with(mut body: Value, pointer: &str, value: Option<Value>) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = body.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    match value {
        Some(value) => target.insert(key.to_owned(), value),
        None => target.remove(key),
    };
    body
}

#[tokio::test]
async fn every_invalid_report_is_400_and_never_echoes_the_hash() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("jane@example.com");
    let good = report_body(&hash, "payment_fraud", "CASE-1");
    let cases: Vec<(&str, Value)> = vec![
        (
            "extra top-level property",
            with(good.clone(), "/extra", Some(json!(1))),
        ),
        (
            "extra identifier property",
            with(good.clone(), "/identifier/extra", Some(json!(1))),
        ),
        (
            "hash as a property name",
            with(good.clone(), &format!("/{hash}"), Some(json!(1))),
        ),
        (
            "identifier type phone",
            with(good.clone(), "/identifier/type", Some(json!("phone"))),
        ),
        (
            "identifier type missing",
            with(good.clone(), "/identifier/type", None),
        ),
        (
            "sha256 missing",
            with(good.clone(), "/identifier/sha256", None),
        ),
        (
            "sha256 uppercase",
            with(
                good.clone(),
                "/identifier/sha256",
                Some(json!(hash.to_uppercase())),
            ),
        ),
        (
            "sha256 63 chars",
            with(good.clone(), "/identifier/sha256", Some(json!(&hash[1..]))),
        ),
        (
            "sha256 65 chars",
            with(
                good.clone(),
                "/identifier/sha256",
                Some(json!(format!("{hash}0"))),
            ),
        ),
        (
            "sha256 of nothing",
            with(good.clone(), "/identifier/sha256", Some(json!(EMPTY))),
        ),
        (
            "sha256 a number",
            with(good.clone(), "/identifier/sha256", Some(json!(5))),
        ),
        (
            "identifier missing",
            with(good.clone(), "/identifier", None),
        ),
        (
            "identifier a string",
            with(good.clone(), "/identifier", Some(json!(hash))),
        ),
        ("category missing", with(good.clone(), "/category", None)),
        (
            "category null",
            with(good.clone(), "/category", Some(Value::Null)),
        ),
        (
            "category unknown",
            with(good.clone(), "/category", Some(json!("spam"))),
        ),
        (
            "case ref missing",
            with(good.clone(), "/member_case_ref", None),
        ),
        (
            "case ref empty",
            with(good.clone(), "/member_case_ref", Some(json!(""))),
        ),
        (
            "case ref 201 chars",
            with(
                good.clone(),
                "/member_case_ref",
                Some(json!("x".repeat(201))),
            ),
        ),
        (
            "case ref control char",
            with(good.clone(), "/member_case_ref", Some(json!("A\tB"))),
        ),
        (
            "case ref email",
            with(
                good.clone(),
                "/member_case_ref",
                Some(json!("jane@example.com")),
            ),
        ),
        (
            "attest false",
            with(good.clone(), "/attest_human_review", Some(json!(false))),
        ),
        (
            "attest string",
            with(good.clone(), "/attest_human_review", Some(json!("true"))),
        ),
        (
            "attest missing",
            with(good.clone(), "/attest_human_review", None),
        ),
        ("not an object", json!([good.clone()])),
    ];

    for (case, body) in cases {
        let response = app
            .registry_post_json("/api/v1/registry/entries", &member.key, &body)
            .await;
        assert_invalid(response, &hash, case).await;
    }
    let at_limit = app
        .registry_report(&member.key, &hash, "payment_fraud", &"é".repeat(200))
        .await;
    assert_eq!(at_limit.status(), 201);
}

#[tokio::test]
async fn a_check_takes_1_to_5_identifiers() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hashes: Vec<String> = (0..6)
        .map(|n| email_hash(&format!("u{n}@example.com")))
        .collect();
    let refs: Vec<&str> = hashes.iter().map(String::as_str).collect();

    for n in [1, 5] {
        assert_eq!(
            app.registry_check(&member.key, &refs[..n]).await.status(),
            200,
            "{n}"
        );
    }
    for n in [0, 6] {
        let response = app.registry_check(&member.key, &refs[..n]).await;
        assert_invalid(response, refs[0], &format!("{n} identifiers")).await;
    }
}

#[tokio::test]
async fn every_invalid_check_is_400_and_never_echoes_the_hash() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("jane@example.com");
    let good = check_body(&[&hash]);
    let cases: Vec<(&str, Value)> = vec![
        (
            "extra property",
            with(good.clone(), "/extra", Some(json!(true))),
        ),
        (
            "extra identifier property",
            with(good.clone(), "/identifiers/0/note", Some(json!("x"))),
        ),
        ("context missing", with(good.clone(), "/context", None)),
        (
            "context unknown",
            with(good.clone(), "/context", Some(json!("checkout"))),
        ),
        (
            "identifiers missing",
            with(good.clone(), "/identifiers", None),
        ),
        (
            "identifiers not a list",
            with(good.clone(), "/identifiers", Some(json!(hash))),
        ),
        (
            "type unknown",
            with(good.clone(), "/identifiers/0/type", Some(json!("phone"))),
        ),
        (
            "sha256 bad",
            with(
                good.clone(),
                "/identifiers/0/sha256",
                Some(json!(hash.to_uppercase())),
            ),
        ),
        (
            "sha256 of nothing",
            with(good.clone(), "/identifiers/0/sha256", Some(json!(EMPTY))),
        ),
    ];

    for (case, body) in cases {
        let response = app
            .registry_post_json("/api/v1/registry/check", &member.key, &body)
            .await;
        assert_invalid(response, &hash, case).await;
    }
    let for_login = with(good.clone(), "/context", Some(json!("login")));
    let for_periodic = with(good, "/context", Some(json!("periodic")));
    for body in [for_login, for_periodic] {
        let response = app
            .registry_post_json("/api/v1/registry/check", &member.key, &body)
            .await;
        assert_eq!(response.status(), 200);
    }
}

#[tokio::test]
async fn malformed_json_is_400() {
    let app = spawn_app().await;
    let member = app.registry_member().await;

    let response = app
        .client
        .post(app.url("/api/v1/registry/check"))
        .bearer_auth(&member.key.key)
        .header("content-type", "application/json")
        .body("{\"identifiers\": [")
        .send()
        .await
        .unwrap();

    moderation_tests::assert_error(response, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn every_registry_row_of_the_access_table_reaches_its_handler() {
    use moderation_api::auth::ENDPOINTS;
    let app = spawn_app().await;
    let member = app.registry_member().await;

    let rows: Vec<_> = ENDPOINTS
        .iter()
        .filter(|e| e.path.starts_with("/api/v1/registry"))
        .collect();
    assert_eq!(rows.len(), 5);
    for row in rows {
        let path = row.path.replace("{id}", &uuid::Uuid::new_v4().to_string());
        let method = reqwest::Method::from_bytes(row.method.as_str().as_bytes()).unwrap();
        let response = app
            .client
            .request(method, app.url(&path))
            .bearer_auth(&member.key.key)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        assert!(
            matches!(status, 200 | 400 | 404) && body["message"] != "no such resource",
            "{} {}: {status} {body}",
            row.method,
            row.path
        );
    }
}
