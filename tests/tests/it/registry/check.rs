use moderation_shared::db::{accounts, accounts::PlanUpdate};
use moderation_tests::{
    assert_error, redis_url,
    registry::{email_hash, update_plan},
    spawn_app,
};
use serde_json::{json, Value};

use super::expire;

fn signal<'a>(body: &'a Value, category: &str) -> &'a Value {
    body["signals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["category"] == category)
        .unwrap_or_else(|| panic!("no {category} signal in {body}"))
}

#[tokio::test]
async fn an_unknown_identifier_does_not_match() {
    let app = spawn_app().await;
    let member = app.registry_member().await;

    let body = app
        .registry_checked(&member.key, &[&email_hash("nobody@example.com")])
        .await;

    assert_eq!(
        body,
        json!({"match": false, "signals": [], "normalisation_version": 1})
    );
}

#[tokio::test]
async fn a_members_own_entries_never_signal_to_it() {
    let app = spawn_app().await;
    let member = app.registry_member().await;
    let hash = email_hash("jane@example.com");
    app.registry_reported(&member.key, &hash, "payment_fraud")
        .await;

    let body = app.registry_checked(&member.key, &[&hash]).await;

    assert_eq!(body["match"], false);
}

#[tokio::test]
async fn one_other_reporter_gives_a_signal_that_needs_review() {
    let app = spawn_app().await;
    let (reporter, checker) = (app.registry_member().await, app.registry_member().await);
    let hash = email_hash("Jane.Saoirse+Work@GoogleMail.com");
    app.registry_reported(&reporter.key, &hash, "payment_fraud")
        .await;

    let body = app
        .registry_checked(&checker.key, &[&email_hash("JANE.SAOIRSE@gmail.com")])
        .await;

    assert_eq!(body["match"], true);
    assert_eq!(body["normalisation_version"], 1);
    let day = format!(
        "{}T00:00:00.000Z",
        &moderation_shared::clock::format_millis(moderation_shared::clock::now())[..10]
    );
    assert_eq!(
        body["signals"],
        json!([{
            "category": "payment_fraud",
            "reporter_count": 1,
            "first_reported_at": day,
            "last_reported_at": day,
            "automated_refusal_permitted": false,
        }])
    );
}

#[tokio::test]
async fn two_active_reporters_permit_automated_refusal() {
    let app = spawn_app().await;
    let (a, b, checker) = (
        app.registry_member().await,
        app.registry_member().await,
        app.registry_member().await,
    );
    let hash = email_hash("jane@example.com");
    app.registry_reported(&a.key, &hash, "ban_evasion").await;
    app.registry_reported(&b.key, &hash, "ban_evasion").await;

    let body = app.registry_checked(&checker.key, &[&hash]).await;

    let s = signal(&body, "ban_evasion");
    assert_eq!(s["reporter_count"], 2);
    assert_eq!(s["automated_refusal_permitted"], true);
}

#[tokio::test]
async fn a_disputed_entry_counts_but_forbids_automated_refusal() {
    let app = spawn_app().await;
    let (a, b, c, checker) = (
        app.registry_member().await,
        app.registry_member().await,
        app.registry_member().await,
        app.registry_member().await,
    );
    let hash = email_hash("jane@example.com");
    app.registry_reported(&a.key, &hash, "ban_evasion").await;
    app.registry_reported(&b.key, &hash, "ban_evasion").await;
    let disputed = app.registry_reported(&c.key, &hash, "ban_evasion").await;
    open_dispute(&app, &disputed).await;

    let body = app.registry_checked(&checker.key, &[&hash]).await;

    let s = signal(&body, "ban_evasion");
    assert_eq!(s["reporter_count"], 3);
    assert_eq!(s["automated_refusal_permitted"], false);
}

#[tokio::test]
async fn one_active_and_one_disputed_reporter_still_match() {
    let app = spawn_app().await;
    let (a, checker) = (app.registry_member().await, app.registry_member().await);
    let hash = email_hash("jane@example.com");
    let entry = app.registry_reported(&a.key, &hash, "payment_fraud").await;
    open_dispute(&app, &entry).await;

    let body = app.registry_checked(&checker.key, &[&hash]).await;

    assert_eq!(body["match"], true);
    assert_eq!(
        signal(&body, "payment_fraud")["automated_refusal_permitted"],
        false
    );
}

#[tokio::test]
async fn revoked_expired_and_terminated_members_entries_never_count() {
    let app = spawn_app().await;
    let (revoker, expirer, terminated, checker) = (
        app.registry_member().await,
        app.registry_member().await,
        app.registry_member().await,
        app.registry_member().await,
    );
    let hash = email_hash("jane@example.com");
    let revoked = app
        .registry_reported(&revoker.key, &hash, "payment_fraud")
        .await;
    app.registry_post_json(
        &format!(
            "/api/v1/registry/entries/{}/revoke",
            revoked["entry_id"].as_str().unwrap()
        ),
        &revoker.key,
        &json!({"reason": "appeal"}),
    )
    .await;
    let expired = app
        .registry_reported(&expirer.key, &hash, "payment_fraud")
        .await;
    expire(&app, expired["entry_id"].as_str().unwrap()).await;
    app.registry_reported(&terminated.key, &hash, "payment_fraud")
        .await;
    let client = app.db.pool.get().await.unwrap();
    accounts::terminate(
        &client,
        moderation_shared::db::audit_events::Actor::Operator,
        terminated.account,
    )
    .await
    .unwrap();

    let body = app.registry_checked(&checker.key, &[&hash]).await;

    assert_eq!(
        body,
        json!({"match": false, "signals": [], "normalisation_version": 1})
    );
}

#[tokio::test]
async fn reporters_are_counted_once_across_identifiers_and_signals_keep_a_fixed_order() {
    let app = spawn_app().await;
    let (a, b, checker) = (
        app.registry_member().await,
        app.registry_member().await,
        app.registry_member().await,
    );
    let (email, other) = (email_hash("jane@example.com"), email_hash("j2@example.com"));
    app.registry_reported(&a.key, &email, "ban_evasion").await;
    app.registry_reported(&a.key, &other, "ban_evasion").await;
    app.registry_reported(&b.key, &other, "ban_evasion").await;
    app.registry_reported(&b.key, &other, "payment_fraud").await;
    app.registry_reported(&a.key, &email, "prohibited_content")
        .await;

    let body = app.registry_checked(&checker.key, &[&email, &other]).await;

    let categories: Vec<&str> = body["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["category"].as_str().unwrap())
        .collect();
    assert_eq!(
        categories,
        ["payment_fraud", "prohibited_content", "ban_evasion"]
    );
    assert_eq!(signal(&body, "ban_evasion")["reporter_count"], 2);
    assert_eq!(signal(&body, "payment_fraud")["reporter_count"], 1);
}

#[tokio::test]
async fn checks_stop_at_the_daily_quota_until_midnight_utc() {
    let app = spawn_app().await;
    let (member, other) = (app.registry_member().await, app.registry_member().await);
    update_plan(
        &app,
        member.account,
        PlanUpdate {
            check_quota_daily: Some(2),
            ..PlanUpdate::default()
        },
    )
    .await;
    let hash = email_hash("jane@example.com");

    let at_limit = [
        app.registry_check(&member.key, &[&hash]).await.status(),
        app.registry_check(&member.key, &[&hash]).await.status(),
    ];
    let over = app.registry_check(&member.key, &[&hash]).await;

    assert_eq!(at_limit, [200, 200]);
    let retry_after: u64 = over.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry_after), "{retry_after}");
    assert_error(over, 429, "QUOTA_EXCEEDED").await;
    assert_eq!(app.registry_check(&other.key, &[&hash]).await.status(), 200);
    let redis = redis::Client::open(redis_url()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!(
            "{}:registry:checks:{}:*",
            app.redis.namespace, member.account
        ))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1);
    let ttl: i64 = redis::cmd("TTL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        (1..=86_400).contains(&ttl),
        "the counter expires at midnight UTC: {ttl}"
    );
}

async fn open_dispute(app: &moderation_tests::TestApp, entry: &Value) {
    let client = app.db.pool.get().await.unwrap();
    let id = entry["entry_id"].as_str().unwrap().parse().unwrap();
    let outcome = moderation_shared::db::registry_entries::dispute(
        &client,
        id,
        moderation_shared::registry::DisputeAction::Open,
        moderation_shared::clock::now(),
    )
    .await
    .unwrap();
    assert!(matches!(
        outcome,
        moderation_shared::db::registry_entries::DisputeOutcome::Done(_)
    ));
}

/// The check query is planned once per connection and its cached generic plan reused: a plan
/// made afresh for every check cost more than the lookup itself.
#[tokio::test]
async fn the_check_query_reuses_its_cached_generic_plan() {
    use moderation_shared::db::registry_entries::find_matches;

    let app = spawn_app().await;
    let member = app.registry_member().await;
    let client = app.db.pool.get().await.unwrap();
    let now = moderation_shared::clock::now();
    for n in 0u8..12 {
        let identifiers: Vec<[u8; 32]> = (0..=n % 5).map(|i| [n ^ i; 32]).collect();
        find_matches(&client, member.account, &identifiers, now)
            .await
            .unwrap();
    }

    let row = client
        .query_one(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements \
             WHERE statement LIKE 'SELECT e.account_id, e.category%'",
            &[],
        )
        .await
        .unwrap();
    let (generic, custom): (i64, i64) = (row.get(0), row.get(1));
    // Postgres tries five custom plans before it settles on the generic one.
    assert_eq!(generic + custom, 12);
    assert!(
        custom <= 5,
        "generic plans {generic}, custom plans {custom}"
    );
}
