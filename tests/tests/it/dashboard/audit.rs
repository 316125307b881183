//! The audit log page: the account's events newest first with who made them, its filters and
//! pages in the URL.

use moderation_shared::{
    clock,
    db::{
        api_keys,
        audit_events::{self, Actor, AuditFilter, Target},
    },
    domain::{AccountId, ApiKeyId, AuditAction},
};
use moderation_tests::{dashboard::next_page, spawn_app, TestApp};
use serde_json::json;
use time::{macros::format_description, Duration};

/// Records `count` events of `action` by `actor` for `account`.
async fn record(app: &TestApp, account: AccountId, actor: Actor, action: AuditAction, count: u32) {
    let client = app.db.pool.get().await.unwrap();
    for n in 0..count {
        audit_events::record(
            &client,
            account,
            actor,
            action,
            &Target::whole("blocklist"),
            json!({ "n": n }),
        )
        .await
        .unwrap();
    }
}

/// The rows of an audit page.
fn rows(page: &str) -> usize {
    page.matches(r#"data-testid="audit-row""#).count()
}

#[tokio::test]
async fn events_are_shown_newest_first_with_who_made_them_and_only_the_accounts_own() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    let visitor = dashboard.signed_in(&user).await;
    let key = app.create_key(account, None).await;
    let other = app.create_account().await;
    record(
        &app,
        account,
        Actor::Key(ApiKeyId(key.key_id)),
        AuditAction::WebhookUrlSet,
        1,
    )
    .await;
    let draft = visitor
        .post(
            "/policy/versions",
            "/policy/versions",
            &[
                ("against", "1"),
                ("sample_rate", "0.25"),
                ("note", "sample a quarter"),
            ],
        )
        .await;
    assert_eq!(draft.status(), 303);
    record(&app, other, Actor::Operator, AuditAction::AccountChanged, 1).await;
    let client = app.db.pool.get().await.unwrap();
    let prefix = api_keys::list(&client, account).await.unwrap()[0]
        .key
        .prefix
        .clone();

    let page = visitor.page("/audit").await;

    let created = page
        .find(r#"data-action="policy.version_created""#)
        .expect("the draft's event");
    let url_set = page
        .find(r#"data-action="webhook.url_set""#)
        .expect("the key's event");
    let key_created = page
        .find(r#"data-action="key.created""#)
        .expect("the operator's event");
    assert!(
        created < url_set && url_set < key_created,
        "newest first: {page}"
    );
    assert!(page.contains(r#"data-action="policy.version_created" data-actor-type="user""#));
    assert!(
        page.contains(&format!(r#"data-testid="audit-actor">{}<"#, user.email)),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            r#"data-testid="audit-actor">{prefix}… (test key)<"#
        )),
        "{page}"
    );
    assert!(
        page.contains(r#"<a href="/policy/versions/2"><code>2</code></a>"#),
        "{page}"
    );
    assert!(
        page.contains("&#34;against_active&#34;:1")
            && page.contains(
                "&#34;review&#34;:[{&#34;sample_rate&#34;:0.0},{&#34;sample_rate&#34;:0.25}]"
            ),
        "the detail as compact JSON: {page}"
    );
    assert!(
        !page.contains(r#"data-action="account.changed""#),
        "another account's events are not shown"
    );
    let nav = visitor.page("/").await;
    assert!(nav.contains(r#"<a href="/audit" aria-current="false">Audit log</a>"#));
    assert!(page.contains(r#"<a href="/audit" aria-current="page">Audit log</a>"#));
}

#[tokio::test]
async fn pages_follow_the_cursor_and_keep_the_filters_in_the_url() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    record(
        &app,
        account,
        Actor::Operator,
        AuditAction::BlocklistChanged,
        60,
    )
    .await;
    record(&app, account, Actor::Operator, AuditAction::KeyDisabled, 3).await;
    let client = app.db.pool.get().await.unwrap();
    let total = audit_events::page(&client, account, &AuditFilter::default(), 1000)
        .await
        .unwrap()
        .len();
    let day = |offset: i64| {
        (clock::now() + Duration::days(offset))
            .format(format_description!("[year]-[month]-[day]"))
            .unwrap()
    };

    let first = visitor.page("/audit").await;
    let mut seen = rows(&first);
    let mut next = next_page(&first);
    while let Some(path) = next {
        let page = visitor.page(&path).await;
        seen += rows(&page);
        next = next_page(&page);
    }
    let filtered = visitor.page("/audit?action=blocklist.changed").await;
    let filtered_next = next_page(&filtered).expect("a second page");
    let filtered_rest = visitor.page(&filtered_next).await;
    let disabled = visitor.page("/audit?action=key.disabled").await;
    let today = visitor
        .page(&format!("/audit?from={}&until={}", day(0), day(0)))
        .await;
    let before = visitor.page(&format!("/audit?until={}", day(-1))).await;
    let bad = visitor.page("/audit?action=key.exploded").await;
    let broken = visitor.page("/audit?after=garbage").await;

    assert_eq!(rows(&first), 50);
    assert_eq!(seen, total, "every event once");
    assert!(
        filtered_next.contains("action=blocklist.changed"),
        "{filtered_next}"
    );
    assert_eq!((rows(&filtered), rows(&filtered_rest)), (50, 10));
    assert!(filtered_rest.contains("Newest events"));
    assert!(next_page(&filtered_rest).is_none());
    assert_eq!(rows(&disabled), 3);
    assert!(disabled.contains(r#"<option value="key.disabled" selected>"#));
    assert_eq!(rows(&today), 50);
    assert_eq!(rows(&before), 0);
    assert!(before.contains("No events match these filters."));
    assert!(
        bad.contains(r#"Unknown action &#34;key.exploded&#34;."#),
        "{bad}"
    );
    assert!(broken.contains("This page link is broken"));
}
