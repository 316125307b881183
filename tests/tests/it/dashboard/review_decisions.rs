//! Decisions on the review pages: uphold and overturn recorded as revisions with the user as
//! actor (the job's page showing them and every delivery), the categories an overturn sets, and
//! refusals shown on the item with nothing changed.

use moderation_shared::{
    db::{
        audit_events::{self, AuditFilter},
        job_decisions, review_items,
    },
    domain::{AccountId, ActorType, AuditAction, JobId, Modality, ReviewItemState},
};
use moderation_tests::{
    dashboard::{location, Visitor},
    review::{image_decision, text_decision},
    spawn_app, TestApp,
};

use super::review::{claim, reviewer, testid};

/// Posts the decision form of the item at `item` with `fields`.
async fn decide(visitor: &Visitor, item: &str, fields: &[(&str, &str)]) -> reqwest::Response {
    visitor.post(item, &format!("{item}/decide"), fields).await
}

/// A stored revision: its number, who decided, whether it prohibits, the note, the reviewer.
type Revision = (
    i32,
    &'static str,
    bool,
    Option<String>,
    Option<(ActorType, uuid::Uuid)>,
);

/// The stored revisions of `job`, oldest first.
async fn revisions(app: &TestApp, job: JobId) -> Vec<Revision> {
    let client = app.db.pool.get().await.unwrap();
    job_decisions::list(&client, job)
        .await
        .unwrap()
        .into_iter()
        .map(|d| {
            (
                d.revision,
                d.decided_by.as_str(),
                d.is_prohibited,
                d.note,
                d.reviewer,
            )
        })
        .collect()
}

/// The review events of `account`, newest first, as (action, actor type, actor id).
async fn review_events(
    app: &TestApp,
    account: AccountId,
) -> Vec<(AuditAction, ActorType, Option<uuid::Uuid>)> {
    let client = app.db.pool.get().await.unwrap();
    audit_events::page(&client, account, &AuditFilter::default(), 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.action.as_str().starts_with("review.") || e.action.as_str().starts_with("appeal.")
        })
        .map(|e| (e.action, e.actor_type, e.actor_id))
        .collect()
}

#[tokio::test]
async fn an_overturn_is_a_revision_by_the_user_with_its_audit_event_and_job_revised() {
    let app = spawn_app().await;
    let (account, user, visitor) = reviewer(&app).await;
    app.set_webhook_url(account, "https://hooks.example/receive")
        .await;
    let job = app
        .finished_into_review(account, Modality::Text, "borderline", text_decision())
        .await;
    let before = visitor.page(&format!("/jobs/{job}")).await;
    let item = claim(&visitor).await;

    let decided = decide(
        &visitor,
        &item,
        &[
            ("outcome", "overturn"),
            ("result", "prohibited"),
            ("note", "A threat in context."),
        ],
    )
    .await;
    let notice = visitor.page(&location(&decided)).await;
    let after = visitor.page(&format!("/jobs/{job}")).await;

    assert_eq!(decided.status(), 303);
    assert_eq!(location(&decided), format!("/review?decided={job}"));
    assert!(
        notice.contains(&format!(
            "job <a href=\"/jobs/{job}\"><code>{job}</code></a> is prohibited at revision 1"
        )),
        "{notice}"
    );
    assert_eq!(
        revisions(&app, job).await,
        [
            (0, "model", false, None, None),
            (
                1,
                "review",
                true,
                Some("A threat in context.".to_owned()),
                Some((ActorType::User, user.user_id))
            ),
        ]
    );
    assert_eq!(
        review_events(&app, account).await,
        [(
            AuditAction::ReviewDecided,
            ActorType::User,
            Some(user.user_id)
        )]
    );
    assert_eq!(before.matches(r#"data-testid="revision-row""#).count(), 1);
    assert!(before.contains(r#"data-revision="0" data-decided-by="model""#));
    assert!(before.contains(r#"<span class="badge wait">pending</span> (sample)"#));
    assert_eq!(before.matches(r#"data-testid="delivery""#).count(), 1);
    assert_eq!(after.matches(r#"data-testid="revision-row""#).count(), 2);
    assert!(after.contains(r#"data-revision="1" data-decided-by="review""#));
    assert!(after.contains("A threat in context.") && after.contains(&user.email));
    assert!(after.contains(r#"<span class="badge">decided</span> (sample)"#));
    assert_eq!(testid(&after, "job-revision"), "1 (by review)");
    let events: Vec<&str> = after
        .match_indices(r#"data-testid="delivery" data-event=""#)
        .map(|(at, m)| after[at + m.len()..].split('"').next().unwrap())
        .collect();
    assert_eq!(events, ["job.completed", "job.revised"]);
    let metrics = visitor.page("/metrics").await;
    for outcome in ["upheld", "overturned"] {
        assert!(
            metrics.contains(&format!("review_decisions_total{{outcome=\"{outcome}\"}}")),
            "{metrics}"
        );
    }
}

#[tokio::test]
async fn an_uphold_is_a_revision_without_a_note_and_sends_no_job_revised() {
    let app = spawn_app().await;
    let (account, user, visitor) = reviewer(&app).await;
    app.set_webhook_url(account, "https://hooks.example/receive")
        .await;
    let job = app
        .finished_into_review(
            account,
            Modality::Image,
            "https://media.example/a.png",
            image_decision(910),
        )
        .await;
    let item = claim(&visitor).await;

    let decided = decide(
        &visitor,
        &item,
        &[("outcome", "uphold"), ("result", "allowed")],
    )
    .await;
    let after = visitor.page(&format!("/jobs/{job}")).await;

    assert_eq!(decided.status(), 303);
    assert_eq!(
        revisions(&app, job).await,
        [
            (0, "model", true, None, None),
            (
                1,
                "review",
                true,
                None,
                Some((ActorType::User, user.user_id))
            ),
        ]
    );
    assert_eq!(
        review_events(&app, account).await,
        [(
            AuditAction::ReviewDecided,
            ActorType::User,
            Some(user.user_id)
        )]
    );
    assert_eq!(after.matches(r#"data-testid="delivery""#).count(), 1);
    assert!(after.contains(r#"data-revision="1" data-decided-by="review""#));
}

#[tokio::test]
async fn an_overturn_sets_the_categories_the_reviewer_chose() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    let job = app
        .finished_into_review(
            account,
            Modality::Image,
            "https://media.example/a.png",
            image_decision(910),
        )
        .await;
    let item = claim(&visitor).await;
    let page = visitor.page(&item).await;

    let decided = decide(
        &visitor,
        &item,
        &[
            ("outcome", "overturn"),
            ("result", "prohibited"),
            ("note", "Underage, not adult."),
            ("shown", "ai_adult_general"),
            ("shown", "nsfw"),
            ("shown", "underage"),
            ("category", "underage"),
        ],
    )
    .await;

    for name in ["ai_adult_general", "nsfw", "underage"] {
        assert!(
            page.contains(&format!(
                r#"<input type="hidden" name="shown" value="{name}">"#
            )),
            "{name}: {page}"
        );
    }
    assert!(
        page.contains(r#"<option value="allowed" selected>"#),
        "an overturn reverses by default"
    );
    assert_eq!(decided.status(), 303);
    let client = app.db.pool.get().await.unwrap();
    let latest = job_decisions::list(&client, job)
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert!(latest.is_prohibited);
    assert_eq!(
        latest.categories.unwrap(),
        serde_json::json!({"ai_adult_general": false, "nsfw": false, "underage": true})
    );
}

#[tokio::test]
async fn a_refused_decision_is_shown_on_the_item_and_changes_nothing() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    let job = app
        .finished_into_review(account, Modality::Text, "borderline", text_decision())
        .await;
    let item = claim(&visitor).await;
    let colleague = app
        .spawn_dashboard()
        .await
        .signed_in(&app.create_user(account, false).await)
        .await;

    let no_note = decide(
        &visitor,
        &item,
        &[("outcome", "overturn"), ("result", "prohibited")],
    )
    .await;
    let no_change = decide(
        &visitor,
        &item,
        &[
            ("outcome", "overturn"),
            ("result", "allowed"),
            ("note", "same"),
        ],
    )
    .await;
    let unknown = decide(
        &visitor,
        &item,
        &[
            ("outcome", "overturn"),
            ("result", "allowed"),
            ("note", "kept as typed"),
            ("shown", "custom.nope"),
            ("category", "custom.nope"),
        ],
    )
    .await;
    let not_held = decide(&colleague, &item, &[("outcome", "uphold")]).await;
    let release_not_held = colleague.post(&item, &format!("{item}/release"), &[]).await;

    assert_eq!(no_note.status(), 400);
    let no_note = no_note.text().await.unwrap();
    assert!(
        testid(&no_note, "decide-error").contains("note is required when the decision changes"),
        "{no_note}"
    );
    assert!(
        no_note.contains(r#"data-testid="review-item""#),
        "still held: {no_note}"
    );
    assert_eq!(no_change.status(), 400);
    assert!(no_change
        .text()
        .await
        .unwrap()
        .contains("This overturn changes nothing"));
    assert_eq!(unknown.status(), 400);
    let unknown = unknown.text().await.unwrap();
    assert!(
        unknown.contains("categories.custom.nope: the job has no such category"),
        "{unknown}"
    );
    assert!(unknown.contains(">kept as typed</textarea>"), "{unknown}");
    assert_eq!(not_held.status(), 409);
    assert!(not_held
        .text()
        .await
        .unwrap()
        .contains("only the reviewer who claimed the item may decide it"));
    assert_eq!(release_not_held.status(), 409);
    assert!(revisions(&app, job).await.is_empty());
    assert!(review_events(&app, account).await.is_empty());
    let client = app.db.pool.get().await.unwrap();
    let id = item.trim_start_matches("/review/items/").parse().unwrap();
    let stored = review_items::get(&client, account, id, uuid::Uuid::nil())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.state, ReviewItemState::Claimed);
}
