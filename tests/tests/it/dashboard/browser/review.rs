//! Human review in a real browser: a reviewer claims an image, sees it blurred and in
//! grayscale, reveals it, overturns it with a note and reads the job's new revision; and two
//! reviewers pressing `Claim next` at once get different items.

use std::time::Duration;

use moderation_shared::domain::Modality;
use moderation_tests::{
    browser::{open_browser, Browser},
    eventually,
    media::{png, MediaServer},
    review::{image_decision, text_decision},
    spawn_app,
};

use super::sign_in;

/// Evaluates `expression` in the page (WebDriver runs it outside the page's policy).
async fn evaluate(browser: &Browser, expression: &str) -> serde_json::Value {
    browser
        .client
        .execute(&format!("return {expression};"), Vec::new())
        .await
        .expect("run a script")
}

/// The computed CSS filter of the review's image.
async fn image_filter(browser: &Browser) -> String {
    let filter = evaluate(
        browser,
        "getComputedStyle(document.querySelector('[data-testid=review-media] img')).filter",
    )
    .await;
    filter.as_str().unwrap_or_default().to_owned()
}

/// Waits until the review's image has loaded from its media server.
async fn image_loaded(browser: &Browser) {
    eventually(Duration::from_secs(20), "the image to load", || async {
        let loaded = evaluate(
            browser,
            "(function (img) { return img.complete && img.naturalWidth > 0; })\
             (document.querySelector('[data-testid=review-media] img'))",
        )
        .await;
        (loaded == serde_json::Value::Bool(true)).then_some(())
    })
    .await;
}

/// The item id of the review item shown.
async fn shown_item(browser: &Browser) -> String {
    browser
        .css(r#"[data-testid="review-item"]"#)
        .await
        .attr("data-item-id")
        .await
        .unwrap()
        .expect("an item id")
}

#[tokio::test]
#[ignore = "browser tier: scripts/test runs it with chromedriver"]
async fn a_reviewer_reveals_a_blurred_image_overturns_it_with_a_note_and_reads_the_revision() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    let media = MediaServer::start().await;
    let url = media.add("picture.png", png(20, 20), "image/png");
    let job = app
        .finished_into_review(account, Modality::Image, &url, image_decision(910))
        .await;
    let browser = open_browser().await;
    sign_in(&browser, &dashboard, &user).await;

    // The queue, then the claimed item: blurred and in grayscale, loaded from its origin.
    browser.goto(&dashboard.url("/review")).await;
    assert_eq!(
        browser
            .css(r#"[data-testid="queue-pending"]"#)
            .await
            .text()
            .await
            .unwrap(),
        "1"
    );
    browser.screenshot("review-queue").await;
    browser.click_button("Claim next").await;
    assert!(browser.path().await.starts_with("/review/items/"));
    let item = browser.css(r#"[data-testid="review-item"]"#).await;
    assert_eq!(
        item.attr("data-job-id").await.unwrap().as_deref(),
        Some(job.to_string().as_str())
    );
    image_loaded(&browser).await;
    let veiled = image_filter(&browser).await;
    assert!(
        veiled.contains("blur(") && veiled.contains("grayscale("),
        "blurred and gray: {veiled}"
    );
    assert_eq!(media.requests("/file/picture.png"), 1);
    browser.screenshot("review-item-blurred").await;

    // Revealed: as it is.
    browser.click_button("Reveal").await;
    image_loaded(&browser).await;
    assert_eq!(image_filter(&browser).await, "none");
    browser.screenshot("review-item-revealed").await;
    browser.resize(390, 844).await;
    evaluate(
        &browser,
        "document.querySelector('[data-testid=review-item]').scrollIntoView()",
    )
    .await;
    browser.screenshot("review-item-phone").await;
    browser.resize(1280, 900).await;

    // Overturned with a note (the form's result is the reverse of the job's: allowed).
    browser
        .input_labelled("Note")
        .await
        .send_keys("A medical illustration, not nudity.")
        .await
        .unwrap();
    browser
        .css(r#"input[name="category"][value="nsfw"]"#)
        .await
        .click()
        .await
        .unwrap();
    browser.click_button("Overturn").await;
    assert_eq!(browser.path().await, "/review");
    let notice = browser
        .css(r#"[data-testid="decided"]"#)
        .await
        .text()
        .await
        .unwrap();
    assert!(notice.contains("is allowed at revision 1"), "{notice}");
    browser.screenshot("review-decided").await;

    // The job's page: its two revisions, the note and the reviewer.
    let before = browser.css("html").await;
    browser
        .css(&format!(r#"[data-testid="decided"] a[href="/jobs/{job}"]"#))
        .await
        .click()
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the job's page", || async {
        before.tag_name().await.is_err().then_some(())
    })
    .await;
    let rows = browser.all(r#"[data-testid="revision-row"]"#).await;
    assert_eq!(rows.len(), 2);
    let latest = rows[1].text().await.unwrap();
    assert!(
        latest.contains("A medical illustration, not nudity.") && latest.contains(&user.email),
        "{latest}"
    );
    assert_eq!(
        rows[1].attr("data-decided-by").await.unwrap().as_deref(),
        Some("review")
    );
    assert_eq!(
        browser
            .css(r#"[data-testid="job-revision"]"#)
            .await
            .text()
            .await
            .unwrap(),
        "1 (by review)"
    );
    evaluate(
        &browser,
        "document.querySelector('[data-testid=revisions]').scrollIntoView()",
    )
    .await;
    browser.screenshot("job-revisions").await;
}

#[tokio::test]
#[ignore = "browser tier: scripts/test runs it with chromedriver"]
async fn two_reviewers_pressing_claim_next_at_once_get_different_items() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let (first, second) = (
        app.create_user(account, false).await,
        app.create_user(account, false).await,
    );
    for text in ["one", "two", "three"] {
        app.finished_into_review(account, Modality::Text, text, text_decision())
            .await;
    }
    let (one, two) = tokio::join!(open_browser(), open_browser());
    sign_in(&one, &dashboard, &first).await;
    sign_in(&two, &dashboard, &second).await;
    one.goto(&dashboard.url("/review")).await;
    two.goto(&dashboard.url("/review")).await;

    tokio::join!(
        one.click_button("Claim next"),
        two.click_button("Claim next")
    );

    let (a, b) = (shown_item(&one).await, shown_item(&two).await);
    assert_ne!(a, b, "one item each");
    one.screenshot("review-claim-first").await;
    two.screenshot("review-claim-second").await;
    one.goto(&dashboard.url("/review")).await;
    assert_eq!(
        one.css(r#"[data-testid="queue-claimed"]"#)
            .await
            .text()
            .await
            .unwrap(),
        "2"
    );
    assert_eq!(
        one.css(r#"[data-testid="held-row"]"#)
            .await
            .attr("data-item-id")
            .await
            .unwrap(),
        Some(a)
    );
}
