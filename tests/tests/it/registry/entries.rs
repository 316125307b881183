use moderation_shared::{
    db::accounts::PlanUpdate,
    domain::Scope,
    registry::{ClientHash, RegistryKey},
};
use moderation_tests::{
    assert_error,
    registry::{email_hash, report_body, update_plan},
    spawn_app, spawn_app_with,
};
use serde_json::Value;
use time::{format_description::well_known::Rfc3339, OffsetDateTime};

use super::expire;

fn instant(value: &Value) -> OffsetDateTime {
    let text = value.as_str().unwrap();
    assert_eq!(text.len(), 24, "RFC 3339 with milliseconds in UTC: {text}");
    assert!(text.ends_with('Z'), "{text}");
    OffsetDateTime::parse(text, &Rfc3339).unwrap()
}

#[tokio::test]
async fn reporting_a_new_identifier_gives_201_with_the_whole_entry() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("jane@example.com");

    let response = app
        .registry_report(&member.key, &hash, "payment_fraud", "CASE-2026-1")
        .await;

    assert_eq!(response.status(), 201);
    let entry: Value = response.json().await.unwrap();
    assert!(entry["entry_id"]
        .as_str()
        .unwrap()
        .parse::<uuid::Uuid>()
        .is_ok());
    assert_eq!(entry["identifier_type"], "email");
    assert_eq!(entry["category"], "payment_fraud");
    assert_eq!(entry["member_case_ref"], "CASE-2026-1");
    assert_eq!(entry["status"], "active");
    assert_eq!(entry["has_open_dispute"], false);
    assert_eq!(entry["revoked_at"], Value::Null);
    assert_eq!(entry["revoke_reason"], Value::Null);
    let created = instant(&entry["created_at"]);
    assert_eq!(instant(&entry["updated_at"]), created);
    assert_eq!(
        instant(&entry["expires_at"]) - created,
        time::Duration::days(365)
    );
    assert_eq!(entry.as_object().unwrap().len(), 11, "{entry}");
}

#[tokio::test]
async fn reporting_again_refreshes_the_same_entry_with_200() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("jane@example.com");
    let first = app
        .registry_reported(&member.key, &hash, "ban_evasion")
        .await;
    let id = first["entry_id"].as_str().unwrap();
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE registry_entries SET expires_at = now() + interval '1 day' WHERE id = $1",
            &[&id.parse::<uuid::Uuid>().unwrap()],
        )
        .await
        .unwrap();

    let response = app
        .registry_report(&member.key, &hash, "ban_evasion", "CASE-NEW")
        .await;

    assert_eq!(response.status(), 200);
    let entry: Value = response.json().await.unwrap();
    assert_eq!(entry["entry_id"], id);
    assert_eq!(entry["member_case_ref"], "CASE-NEW");
    assert_eq!(entry["status"], "active");
    assert_eq!(entry["created_at"], first["created_at"]);
    let updated = instant(&entry["updated_at"]);
    assert_eq!(
        instant(&entry["expires_at"]) - updated,
        time::Duration::days(365)
    );
}

#[tokio::test]
async fn refreshing_an_expired_entry_makes_it_active_again() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("jane@example.com");
    let entry = app
        .registry_reported(&member.key, &hash, "ban_evasion")
        .await;
    expire(&app, entry["entry_id"].as_str().unwrap()).await;

    let refreshed: Value = app
        .registry_report(&member.key, &hash, "ban_evasion", "CASE-2")
        .await
        .json()
        .await
        .unwrap();

    assert_eq!(refreshed["entry_id"], entry["entry_id"]);
    assert_eq!(refreshed["status"], "active");
}

#[tokio::test]
async fn each_category_and_each_member_has_its_own_entry() {
    let app = spawn_app().await;
    let (a, b) = (app.registry_member().await, app.registry_member().await);
    let hash = email_hash("jane@example.com");

    let fraud = app
        .registry_report(&a.key, &hash, "payment_fraud", "A-1")
        .await;
    let content = app
        .registry_report(&a.key, &hash, "prohibited_content", "A-2")
        .await;
    let other = app
        .registry_report(&b.key, &hash, "payment_fraud", "B-1")
        .await;

    assert_eq!(fraud.status(), 201);
    assert_eq!(content.status(), 201);
    assert_eq!(other.status(), 201);
}

#[tokio::test]
async fn stored_identifiers_are_the_keyed_hash_and_never_the_clients_hash() {
    let secret = [42u8; 32];
    let app = spawn_app_with(|s| s.registry_key = RegistryKey::from_bytes(&secret)).await;
    let member = app.registry_member().await;
    let hash = email_hash("jane@example.com");
    app.registry_reported(&member.key, &hash, "payment_fraud")
        .await;

    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT identifier, row_to_json(e)::text AS everything FROM registry_entries e",
            &[],
        )
        .await
        .unwrap();

    let stored: Vec<u8> = row.get("identifier");
    let expected = RegistryKey::from_bytes(&secret).identify(&ClientHash::parse(&hash).unwrap());
    assert_eq!(stored, expected);
    assert_ne!(hex::encode(&stored), hash);
    let everything: String = row.get("everything");
    assert!(
        !everything.contains(&hash),
        "the client's hash is stored: {everything}"
    );
}

#[tokio::test]
async fn an_entry_can_be_read_only_by_its_member() {
    let app = spawn_app().await;
    let (owner, other) = (app.registry_member().await, app.registry_member().await);
    let entry = app
        .registry_reported(&owner.key, &email_hash("a@example.com"), "payment_fraud")
        .await;
    let path = format!(
        "/api/v1/registry/entries/{}",
        entry["entry_id"].as_str().unwrap()
    );

    let own = app.get(&path, &owner.key).await;
    let foreign = app.get(&path, &other.key).await;
    let unknown = app
        .get(
            &format!("/api/v1/registry/entries/{}", uuid::Uuid::new_v4()),
            &owner.key,
        )
        .await;
    let malformed = app
        .get("/api/v1/registry/entries/not-a-uuid", &owner.key)
        .await;

    assert_eq!(own.status(), 200);
    assert_eq!(own.json::<Value>().await.unwrap(), entry);
    assert_error(foreign, 404, "NOT_FOUND").await;
    assert_error(unknown, 404, "NOT_FOUND").await;
    assert_error(malformed, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn the_listing_pages_through_own_entries_oldest_first() {
    let app = spawn_app().await;
    let (owner, other) = (app.registry_member().await, app.registry_member().await);
    let mut ids = Vec::new();
    for n in 0..3 {
        let entry = app
            .registry_reported(
                &owner.key,
                &email_hash(&format!("u{n}@example.com")),
                "ban_evasion",
            )
            .await;
        ids.push(entry["entry_id"].clone());
    }
    app.registry_reported(&other.key, &email_hash("u0@example.com"), "ban_evasion")
        .await;

    let first: Value = app
        .get("/api/v1/registry/entries?limit=2", &owner.key)
        .await
        .json()
        .await
        .unwrap();
    let cursor = first["next_cursor"].as_str().unwrap();
    let second: Value = app
        .get(
            &format!("/api/v1/registry/entries?limit=2&cursor={cursor}"),
            &owner.key,
        )
        .await
        .json()
        .await
        .unwrap();

    let page = |v: &Value| -> Vec<Value> {
        v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["entry_id"].clone())
            .collect()
    };
    assert_eq!(page(&first), ids[..2]);
    assert_eq!(page(&second), ids[2..]);
    assert_eq!(second["next_cursor"], Value::Null);
}

#[tokio::test]
async fn the_listing_limit_is_1_to_1000_and_the_cursor_must_be_valid() {
    let app = spawn_app().await;
    let member = app.registry_member().await;

    for ok in ["limit=1", "limit=1000", ""] {
        let response = app
            .get(&format!("/api/v1/registry/entries?{ok}"), &member.key)
            .await;
        assert_eq!(response.status(), 200, "{ok}");
    }
    for bad in ["limit=0", "limit=1001", "limit=x", "cursor=nope"] {
        let response = app
            .get(&format!("/api/v1/registry/entries?{bad}"), &member.key)
            .await;
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn an_entry_past_its_retention_reads_as_expired() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let entry = app
        .registry_reported(&member.key, &email_hash("a@example.com"), "payment_fraud")
        .await;
    let id = entry["entry_id"].as_str().unwrap();

    expire(&app, id).await;

    let read: Value = app
        .get(&format!("/api/v1/registry/entries/{id}"), &member.key)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(read["status"], "expired");
}

#[tokio::test]
async fn registry_endpoints_need_their_own_scope() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let check_only = app
        .create_key(member.account, Some(&[Scope::RegistryCheck]))
        .await;
    let submit_only = app
        .create_key(member.account, Some(&[Scope::RegistrySubmit]))
        .await;
    let hash = email_hash("a@example.com");

    let report = app
        .registry_post_json(
            "/api/v1/registry/entries",
            &check_only,
            &report_body(&hash, "payment_fraud", "C"),
        )
        .await;
    let list = app.get("/api/v1/registry/entries", &check_only).await;
    let check = app.registry_check(&submit_only, &[&hash]).await;

    assert_error(report, 403, "FORBIDDEN").await;
    assert_error(list, 403, "FORBIDDEN").await;
    assert_error(check, 403, "FORBIDDEN").await;
}

#[tokio::test]
async fn registry_scopes_need_a_vetted_member_when_issued_and_when_used() {
    let app = spawn_app().await;
    let outsider = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    let refused = moderation_shared::provisioning::issue_key(
        &client,
        moderation_shared::db::audit_events::Actor::Operator,
        outsider,
        None,
        Some(&[Scope::RegistryCheck]),
        None,
    )
    .await;
    assert!(refused.is_err());
    let member = app.registry_member().await;

    update_plan(
        &app,
        member.account,
        PlanUpdate {
            registry_member: Some(false),
            ..PlanUpdate::default()
        },
    )
    .await;

    let response = moderation_tests::eventually(
        std::time::Duration::from_secs(5),
        "the membership change to take effect",
        || async {
            let response = app
                .registry_check(&member.key, &[&email_hash("a@example.com")])
                .await;
            (response.status() == 403).then_some(response)
        },
    )
    .await;
    assert_error(response, 403, "FORBIDDEN").await;
}
