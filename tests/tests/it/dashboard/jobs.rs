//! Jobs: submitting from the dashboard, the list's filters and pages, the detail with its
//! delivery and attempts, another account's job, and the staff pages.

use std::time::Duration;

use moderation_shared::{
    db::jobs::{self, Search},
    domain::{JobId, JobStatus},
};
use moderation_tests::{
    dashboard::{location, next_page},
    eventually,
    fixtures::{ensure_partitions, JobRow},
    plans, spawn_app,
    worker::spawn_worker,
};
use time::macros::datetime;

#[tokio::test]
async fn a_prompt_submitted_from_the_dashboard_completes_without_a_key() {
    let app = spawn_app().await;
    let (_, visitor) = app.signed_in_dashboard(false).await;
    let _worker = spawn_worker(&app, |_| {}).await;

    let submitted = visitor
        .post(
            "/submit",
            "/submit",
            &[("type", "text"), ("text", "hello there, friend")],
        )
        .await;
    assert_eq!(submitted.status(), 303);
    let job_path = location(&submitted);
    let job_id: uuid::Uuid = job_path.trim_start_matches("/jobs/").parse().unwrap();

    let page = eventually(Duration::from_secs(20), "the job to complete", || async {
        let page = visitor.page(&job_path).await;
        page.contains(r#"data-testid="job-status">completed<"#)
            .then_some(page)
    })
    .await;
    assert!(page.contains("allowed"), "{page}");
    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one("SELECT api_key_id FROM jobs WHERE id = $1", &[&job_id])
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<uuid::Uuid>>(0), None);
    let list = visitor.page("/jobs").await;
    assert!(list.contains(&format!(r#"data-testid="job-row" data-job-id="{job_id}""#)));
}

#[tokio::test]
async fn a_chat_submitted_from_the_dashboard_is_stored_as_the_api_stores_one() {
    let app = spawn_app().await;
    let (_, visitor) = app.signed_in_dashboard(false).await;

    let submitted = visitor
        .post(
            "/submit",
            "/submit",
            &[
                ("type", "chat"),
                (
                    "messages",
                    "system: Be brief.\nuser: Hello,\nhow are you?\nassistant: Fine.",
                ),
            ],
        )
        .await;
    let no_role = visitor
        .post(
            "/submit",
            "/submit",
            &[("type", "chat"), ("messages", "just some text")],
        )
        .await;

    assert_eq!(submitted.status(), 303);
    let job_id: uuid::Uuid = location(&submitted)
        .trim_start_matches("/jobs/")
        .parse()
        .unwrap();
    let client = app.db.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT type, content, messages FROM jobs WHERE id = $1",
            &[&job_id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>("type"), "text");
    assert_eq!(
        row.get::<_, String>("content"),
        "system: Be brief.\nuser: Hello,\nhow are you?\nassistant: Fine."
    );
    assert_eq!(
        row.get::<_, serde_json::Value>("messages"),
        serde_json::json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello,\nhow are you?"},
            {"role": "assistant", "content": "Fine."},
        ])
    );
    // The refusal is shown inside the chat form, with what was typed kept.
    assert_eq!(no_role.status(), 400);
    let page = no_role.text().await.unwrap();
    assert!(page.contains(r#"id="messages-error">Line 1 must start with a role"#));
    assert!(page.contains(r#"aria-describedby="messages-error""#));
    assert!(page.contains(">just some text</textarea>"));
    assert!(!page.contains(r#"id="text-error""#));
}

#[tokio::test]
async fn a_refused_media_url_is_shown_in_its_form_with_what_was_typed() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;

    let refused = visitor
        .post(
            "/submit",
            "/submit",
            &[("type", "video"), ("url", "ftp://example.com/clip.mp4")],
        )
        .await;

    assert_eq!(refused.status(), 400);
    let page = refused.text().await.unwrap();
    assert!(page.contains(r#"id="url-error">The URL was refused"#));
    assert!(page.contains(r#"value="ftp://example.com/clip.mp4""#));
    assert!(page.contains(r#"<option value="video" selected>"#));
    let client = app.db.pool.get().await.unwrap();
    let stored: i64 = client
        .query_one(
            "SELECT count(*) FROM jobs WHERE account_id = $1",
            &[&account.0],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0);
}

#[tokio::test]
async fn the_job_list_keeps_its_filters_and_page_in_the_url() {
    let app = spawn_app().await;
    let (account, visitor) = app.signed_in_dashboard(false).await;
    for i in 0..30 {
        JobRow::new(account, "text", "x", datetime!(2026-03-01 00:00 UTC))
            .completed(datetime!(2026-03-01 00:01 UTC), i % 2 == 0, None)
            .insert(&app.db.pool)
            .await;
    }
    JobRow::new(
        account,
        "image",
        "https://example.com/a.png",
        datetime!(2026-04-02 10:00 UTC),
    )
    .insert(&app.db.pool)
    .await;
    let rows = |html: &str| html.matches(r#"data-testid="job-row""#).count();
    let unescaped = |html: &str| html.replace("&#38;", "&").replace("&amp;", "&");

    let first = visitor.page("/jobs?type=text").await;
    let next = next_page(&first).expect("a link to the next page");
    // A job submitted meanwhile does not shift the next page.
    JobRow::new(account, "text", "new", datetime!(2026-05-01 00:00 UTC))
        .insert(&app.db.pool)
        .await;
    let second = visitor.page(&next).await;
    let images = visitor
        .page("/jobs?type=image&from=2026-04-02&until=2026-04-02")
        .await;
    let none = visitor.page("/jobs?status=failed").await;
    let bad = visitor.page("/jobs?status=paused").await;
    let broken = visitor.page("/jobs?type=text&after=not-a-cursor").await;

    assert_eq!(rows(&first), 25);
    assert!(next.starts_with("/jobs?type=text&after="), "{next}");
    assert_eq!(rows(&second), 5);
    assert_eq!(next_page(&second), None);
    assert!(unescaped(&second).contains(r#"href="/jobs?type=text">Newest jobs"#));
    let ids = |html: &str| -> Vec<String> {
        html.split(r#"data-job-id=""#)
            .skip(1)
            .map(|s| s.split('"').next().unwrap_or_default().to_owned())
            .collect()
    };
    let mut shown = ids(&first);
    shown.extend(ids(&second));
    shown.sort();
    shown.dedup();
    assert_eq!(shown.len(), 30, "the 30 text jobs of March, each once");
    assert_eq!(rows(&images), 1);
    assert!(images.contains(r#"<option value="image" selected>"#));
    assert!(none.contains("No jobs match these filters."));
    assert!(bad.contains("Unknown status"), "{bad}");
    assert!(broken.contains("This page link is broken"), "{broken}");
}

#[tokio::test]
async fn every_job_list_page_is_read_from_an_index() {
    let app = spawn_app().await;
    let account = app.create_account().await;
    let client = app.db.pool.get().await.unwrap();
    ensure_partitions(&app.db.pool, datetime!(2026-01-01 0:00 UTC)).await;
    // Enough rows that Postgres prefers the index to a scan of the table; queued, each with
    // its row of `open_jobs`.
    client
        .execute(
            "WITH j AS (INSERT INTO jobs (id, account_id, type, content, created_at, updated_at) \
                        SELECT uuid_v7(t), $1, 'text', 'x', t, t \
                        FROM generate_series(timestamptz '2026-01-01', \
                                             timestamptz '2026-01-20', interval '1 minute') AS t \
                        RETURNING id, account_id, type, created_at) \
             INSERT INTO open_jobs (job_id, account_id, type, created_at) \
             SELECT id, account_id, type, created_at FROM j",
            &[&account.0],
        )
        .await
        .unwrap();
    client
        .batch_execute("ANALYZE jobs; ANALYZE open_jobs")
        .await
        .unwrap();
    let after = Some((datetime!(2026-01-10 00:00 UTC), JobId(uuid::Uuid::nil())));
    let searches = [
        Search::default(),
        Search {
            status: Some(JobStatus::Queued),
            ..Search::default()
        },
        Search {
            from: Some(datetime!(2026-01-05 00:00 UTC)),
            until: Some(datetime!(2026-01-06 00:00 UTC)),
            ..Search::default()
        },
    ];

    for search in &searches {
        for after in [None, after] {
            let plan = jobs::search_plan(&client, account, search, after, 26)
                .await
                .unwrap();
            assert!(plan.contains("Index Scan"), "{search:?} {after:?}: {plan}");
            assert!(!plans::sorts(&plan), "{search:?} {after:?}: {plan}");
        }
    }
    // A type that few of the account's jobs have is read from its own index, not found by
    // walking every job of the account.
    let images = Search {
        kind: Some("image".to_owned()),
        ..Search::default()
    };
    for after in [None, after] {
        let plan = jobs::search_plan(&client, account, &images, after, 26)
            .await
            .unwrap();
        assert!(
            plan.contains("_account_id_type_created_at_id_idx"),
            "{after:?}: {plan}"
        );
        // The few rows it finds may be sorted; no partition holding rows is read whole.
        assert_eq!(
            plans::full_reads(&client, &plan).await,
            Vec::<String>::new(),
            "{after:?}: {plan}"
        );
    }
}

#[tokio::test]
async fn another_accounts_job_is_not_found() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let user = app.create_user(app.create_account().await, false).await;
    let other = app.create_account().await;
    let job = JobRow::new(other, "text", "theirs", datetime!(2026-03-01 00:00 UTC));
    job.insert(&app.db.pool).await;
    let visitor = dashboard.signed_in(&user).await;

    let theirs = visitor.get(&format!("/jobs/{}", job.id)).await;
    let resend = visitor
        .post(
            "/jobs",
            &format!("/deliveries/{}/resend", uuid::Uuid::new_v4()),
            &[],
        )
        .await;
    let garbage = visitor.get("/jobs/not-a-job").await;

    assert_eq!(theirs.status(), 404);
    assert_eq!(resend.status(), 404);
    assert_eq!(garbage.status(), 404);
}

#[tokio::test]
async fn staff_pages_are_for_staff_only() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let member = dashboard
        .signed_in(&app.create_user(account, false).await)
        .await;
    let staff = dashboard
        .signed_in(&app.create_user(account, true).await)
        .await;
    let target = app.create_account().await;
    let terminate = format!("/staff/accounts/{target}/terminate");

    let refused = member.get("/staff/accounts").await;
    let refused_post = member.post("/", &terminate, &[]).await;
    let listed = staff.page("/staff/accounts").await;

    assert_eq!(refused.status(), 403);
    assert_eq!(refused_post.status(), 403);
    assert!(!member.page("/").await.contains("/staff/accounts"));
    assert!(listed.contains(&target.to_string()));
    let terminated = staff.post("/staff/accounts", &terminate, &[]).await;
    assert_eq!(terminated.status(), 303);
    assert!(staff.page("/staff/accounts").await.contains("terminated"));
}

#[tokio::test]
async fn staff_open_and_uphold_a_registry_dispute() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let member = app.registry_member().await;
    let entry = app
        .registry_reported(
            &member.key,
            &moderation_tests::registry::email_hash("fraud@example.com"),
            "payment_fraud",
        )
        .await;
    let entry_id = entry["entry_id"].as_str().unwrap().to_owned();
    let staff = dashboard
        .signed_in(&app.create_user(app.create_account().await, true).await)
        .await;
    let action = |verb: &str| format!("/staff/registry/{entry_id}/{verb}");

    let listed = staff.page("/staff/registry").await;
    let early = staff.post("/staff/registry", &action("uphold"), &[]).await;
    let opened = staff.post("/staff/registry", &action("open"), &[]).await;
    let disputed = staff.page("/staff/registry").await;
    let upheld = staff.post("/staff/registry", &action("uphold"), &[]).await;

    assert!(listed.contains(&entry_id) && listed.contains("Open dispute"));
    assert_eq!(early.status(), 400, "nothing to uphold before a dispute");
    assert_eq!(opened.status(), 303);
    assert!(disputed.contains("dispute open"), "{disputed}");
    assert_eq!(upheld.status(), 303);
    assert!(staff.page("/staff/registry").await.contains("revoked"));
}
