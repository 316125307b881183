//! The keys page: a new key is shown once and works; rename, disable and delete.

use moderation_tests::{dashboard::location, spawn_app};

/// The text of the element marked `data-testid="new-key"`, if the page has one.
fn new_key_of(html: &str) -> Option<String> {
    let marker = r#"data-testid="new-key">"#;
    let start = html.find(marker)? + marker.len();
    Some(html[start..].split('<').next()?.to_owned())
}

#[tokio::test]
async fn a_created_key_is_shown_once_then_only_its_prefix() {
    let app = spawn_app().await;
    let (_, visitor) = app.signed_in_dashboard(false).await;

    let created = visitor
        .post(
            "/keys",
            "/keys",
            &[
                ("name", "ci"),
                ("scope", "moderate:prompt"),
                ("scope", "job:read"),
            ],
        )
        .await;
    assert_eq!(created.status(), 303);
    assert_eq!(location(&created), "/keys");
    let shown = visitor.page("/keys").await;
    let key = new_key_of(&shown).expect("the new key is shown");
    let reloaded = visitor.page("/keys").await;

    assert!(key.starts_with("msk_"), "{key}");
    assert!(new_key_of(&reloaded).is_none(), "shown only once");
    assert!(!reloaded.contains(&key));
    let prefix = &key[4..12];
    assert!(reloaded.contains(&format!("msk_{prefix}_")), "{reloaded}");
    assert!(
        reloaded.contains("moderate:prompt, job:read")
            || reloaded.contains("job:read, moderate:prompt")
    );
    let me = app
        .client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200, "the key works on the api");
}

#[tokio::test]
async fn keys_are_renamed_disabled_and_deleted_only_within_the_account() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    let key = app.create_key(account, None).await;
    let other = app.account_with_key(None).await;
    let path = |action: &str| format!("/keys/{}/{action}", key.key_id);

    let renamed = visitor
        .post("/keys", &path("rename"), &[("name", "renamed")])
        .await;
    let disabled = visitor.post("/keys", &path("disable"), &[]).await;
    let foreign = visitor
        .post("/keys", &format!("/keys/{}/delete", other.key_id), &[])
        .await;

    assert_eq!(renamed.status(), 303);
    assert_eq!(disabled.status(), 303);
    assert_eq!(foreign.status(), 404);
    let page = visitor.page("/keys").await;
    assert!(
        page.contains("renamed") && page.contains("disabled"),
        "{page}"
    );
    assert_eq!(app.get("/api/v1/me", &other).await.status(), 200);

    let deleted = visitor.post("/keys", &path("delete"), &[]).await;
    assert_eq!(deleted.status(), 303);
    assert!(visitor.page("/keys").await.contains("No keys yet"));
}

#[tokio::test]
async fn a_key_cannot_carry_a_scope_the_session_lacks() {
    let app = spawn_app().await;
    let (_, visitor) = app.signed_in_dashboard(true).await;

    let page = visitor.page("/keys").await;
    let staff_scope = visitor
        .post("/keys", "/keys", &[("scope", "admin:config")])
        .await;
    let registry = visitor
        .post("/keys", "/keys", &[("scope", "registry:check")])
        .await;

    assert!(!page.contains(r#"value="admin:config""#));
    assert_eq!(staff_scope.status(), 400);
    assert_eq!(registry.status(), 400, "not a registry member");
}
