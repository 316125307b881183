//! The review pages: the queue's counts, `Claim next` and the item it shows (content, scores,
//! media blurred until revealed, an appeal's reason), release, CSRF and another account's item
//! (decisions: `review_decisions`).

use moderation_shared::{
    db::audit_events::Actor,
    domain::{AccountId, Modality, ReviewReason},
    review,
};
use moderation_tests::{
    dashboard::{location, TestUser, Visitor},
    media::{png, MediaServer},
    review::{image_decision, text_decision},
    spawn_app, TestApp,
};

/// A signed-in reviewer of a new account.
pub(super) async fn reviewer(app: &TestApp) -> (AccountId, TestUser, Visitor) {
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    let visitor = dashboard.signed_in(&user).await;
    (account, user, visitor)
}

/// Presses `Claim next`; the path it leads to.
pub(super) async fn claim(visitor: &Visitor) -> String {
    let res = visitor.post("/review", "/review/claim", &[]).await;
    assert_eq!(res.status(), 303);
    location(&res)
}

/// The text of the element with `data-testid` `id` in `html` (up to its first tag).
pub(super) fn testid(html: &str, id: &str) -> String {
    let marker = format!(r#"data-testid="{id}""#);
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {id} in {html}"));
    let rest = &html[start..];
    let text = &rest[rest.find('>').unwrap() + 1..];
    text[..text.find('<').unwrap()].trim().to_owned()
}

#[tokio::test]
async fn the_queue_page_counts_the_accounts_open_items_and_the_oldest_ones_age() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    let other = app.create_account().await;
    app.finished_into_review(account, Modality::Text, "first", text_decision())
        .await;
    let mut band = text_decision();
    band.review = vec![ReviewReason::Band];
    app.finished_into_review(account, Modality::Text, "second", band)
        .await;
    app.finished_into_review(other, Modality::Text, "another's", text_decision())
        .await;
    let fresh_account_page = {
        let (_, _, fresh) = reviewer(&app).await;
        fresh.page("/review").await
    };

    let page = visitor.page("/review").await;

    assert_eq!(testid(&page, "queue-pending"), "2");
    assert_eq!(testid(&page, "queue-claimed"), "0");
    assert_eq!(testid(&page, "queue-sample"), "1");
    assert_eq!(testid(&page, "queue-band"), "1");
    assert_eq!(testid(&page, "queue-appeal"), "0");
    assert!(
        testid(&page, "queue-oldest").starts_with("waiting "),
        "{page}"
    );
    assert!(page.contains("<button type=\"submit\">Claim next</button>"));
    assert!(
        page.contains(r#"href="/review" aria-current="page""#),
        "in the bar"
    );
    assert_eq!(testid(&fresh_account_page, "queue-pending"), "0");
    assert!(fresh_account_page.contains(r#"data-testid="queue-oldest"><span class="muted">none"#));
}

#[tokio::test]
async fn claim_next_shows_the_oldest_item_with_its_content_and_scores_and_then_nothing() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    let job = app
        .finished_into_review(
            account,
            Modality::Text,
            "a prompt <b>to review</b>",
            text_decision(),
        )
        .await;

    let item = claim(&visitor).await;
    let page = visitor.page(&item).await;
    let queue = visitor.page("/review").await;
    let none = claim(&visitor).await;

    assert!(item.starts_with("/review/items/"), "{item}");
    assert!(
        page.contains(&format!(
            r#"data-testid="review-item" data-item-id="{}" data-job-id="{job}""#,
            item.trim_start_matches("/review/items/")
        )),
        "{page}"
    );
    assert!(
        page.contains("a prompt &#60;b&#62;to review&#60;/b&#62;"),
        "the content, escaped: {page}"
    );
    assert_eq!(testid(&page, "item-reasons"), "sample");
    assert_eq!(testid(&page, "item-state"), "claimed");
    assert!(
        page.contains("<code>violence</code>") && page.contains("0.12"),
        "{page}"
    );
    for button in ["Uphold", "Overturn", "Release"] {
        assert!(
            page.contains(&format!(">{button}</button>")),
            "{button}: {page}"
        );
    }
    assert!(!page.contains("review-media"), "a prompt has no media");
    assert_eq!(testid(&queue, "queue-claimed"), "1");
    assert!(queue.contains(&format!(
        r#"data-testid="held-row" data-item-id="{}""#,
        item.trim_start_matches("/review/items/")
    )));
    assert_eq!(none, "/review?empty=1");
    assert!(visitor
        .page(&none)
        .await
        .contains(r#"data-testid="queue-empty""#));
}

#[tokio::test]
async fn an_image_is_blurred_until_revealed_and_its_origin_alone_is_allowed() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    let media = MediaServer::start().await;
    let url = media.add("picture.png", png(10, 10), "image/png");
    app.finished_into_review(account, Modality::Image, &url, image_decision(910))
        .await;
    let item = claim(&visitor).await;

    let blurred = visitor.get(&item).await;
    let csp = blurred.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let blurred = blurred.text().await.unwrap();
    let revealed = visitor.page(&format!("{item}?reveal=1")).await;
    let off = visitor
        .post("/review", "/review/media", &[("blur", "off")])
        .await;
    let unblurred = visitor.page(&item).await;
    visitor
        .post("/review", "/review/media", &[("blur", "on")])
        .await;
    let blurred_again = visitor.page(&item).await;

    assert!(
        blurred.contains(
            r#"<figure class="media veiled" data-testid="review-media" data-kind="image">"#
        ) && blurred.contains(&format!(r#"<img src="{url}""#)),
        "{blurred}"
    );
    assert!(blurred.contains(">Reveal</button>"));
    assert!(
        csp.contains(&format!(
            "img-src 'self' {}; media-src {};",
            media.base_url, media.base_url
        )) && csp.contains("default-src 'none'")
            && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(
        blurred.contains(r#"data-category="nsfw">nsfw: yes"#),
        "{blurred}"
    );
    assert!(
        revealed.contains(r#"<figure class="media" data-testid="review-media""#)
            && !revealed.contains(">Reveal</button>")
            && revealed.contains(r#"<input type="hidden" name="reveal" value="1">"#),
        "{revealed}"
    );
    assert_eq!(off.status(), 303);
    assert!(unblurred.contains(r#"<figure class="media" data-testid="review-media""#));
    assert!(!unblurred.contains(">Reveal</button>"), "{unblurred}");
    assert!(blurred_again.contains("media veiled"));
    let queue = visitor.page("/review").await;
    assert!(
        queue.contains("Show media unblurred"),
        "the setting is back on: {queue}"
    );
    assert_eq!(
        visitor.get("/review").await.headers()["content-security-policy"]
            .to_str()
            .unwrap(),
        moderation_dashboard::headers::CSP,
        "other pages keep the fixed policy"
    );
}

#[tokio::test]
async fn a_video_is_muted_and_blurred_and_an_audio_is_a_player() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    let video = "https://media.example/clip.mp4";
    let audio = "https://sound.example/talk.wav";
    let mut sampled = text_decision();
    sampled.categories = None;
    app.finished_into_review(account, Modality::Video, video, image_decision(100))
        .await;
    app.finished_into_review(account, Modality::Audio, audio, sampled)
        .await;

    let video_page = visitor.page(&claim(&visitor).await).await;
    let audio_page = visitor.page(&claim(&visitor).await).await;

    assert!(
        video_page.contains(&format!(r#"<video src="{video}" muted controls"#))
            && video_page.contains("media veiled")
            && video_page.contains(">Reveal</button>"),
        "{video_page}"
    );
    assert!(
        audio_page.contains(&format!(r#"<audio src="{audio}" controls"#))
            && !audio_page.contains("veiled")
            && !audio_page.contains(">Reveal</button>"),
        "{audio_page}"
    );
}

#[tokio::test]
async fn release_puts_the_item_back_in_the_queue() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    app.finished_into_review(
        account,
        Modality::Text,
        "a prompt given back",
        text_decision(),
    )
    .await;
    let item = claim(&visitor).await;

    let released = visitor.post(&item, &format!("{item}/release"), &[]).await;
    let queue = visitor.page("/review").await;
    let page = visitor.page(&item).await;

    assert_eq!(released.status(), 303);
    assert_eq!(location(&released), "/review");
    assert_eq!(testid(&queue, "queue-pending"), "1");
    assert_eq!(testid(&queue, "queue-claimed"), "0");
    assert!(!page.contains(r#"data-testid="review-item""#), "{page}");
    assert!(
        !page.contains("a prompt given back"),
        "no content unless held: {page}"
    );
    assert_eq!(testid(&page, "item-state"), "pending");
}

#[tokio::test]
async fn an_appeal_is_claimed_first_and_shows_its_reason() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    app.finished_into_review(account, Modality::Text, "sampled", text_decision())
        .await;
    let mut plain = text_decision();
    plain.review = Vec::new();
    let appealed = app
        .finished_into_review(account, Modality::Text, "appealed", plain)
        .await;
    {
        let mut client = app.db.pool.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        review::appeal(
            &tx,
            account,
            Actor::Operator,
            appealed,
            uuid::Uuid::nil(),
            "It was a quote.",
            Some("case-7"),
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    let page = visitor.page(&claim(&visitor).await).await;

    assert!(
        page.contains(&format!(r#"data-job-id="{appealed}""#)),
        "{page}"
    );
    assert_eq!(testid(&page, "item-reasons"), "appeal");
    assert!(
        page.contains("It was a quote.") && page.contains("case-7"),
        "{page}"
    );
}

#[tokio::test]
async fn review_forms_need_the_csrf_token_and_another_accounts_item_is_not_found() {
    let app = spawn_app().await;
    let (account, _, visitor) = reviewer(&app).await;
    let (_, _, stranger) = reviewer(&app).await;
    app.finished_into_review(account, Modality::Text, "mine", text_decision())
        .await;
    let item = claim(&visitor).await;

    let forged_claim = visitor.post_raw("/review/claim", &[]).await;
    let forged_decide = visitor
        .post_raw(
            &format!("{item}/decide"),
            &[("outcome", "uphold"), ("csrf", "wrong")],
        )
        .await;
    let forged_release = visitor.post_raw(&format!("{item}/release"), &[]).await;
    let forged_media = visitor.post_raw("/review/media", &[("blur", "off")]).await;
    let strangers_view = stranger.get(&item).await;
    let strangers_decide = stranger
        .post(
            "/review",
            &format!("{item}/decide"),
            &[("outcome", "uphold")],
        )
        .await;
    let strangers_release = stranger
        .post("/review", &format!("{item}/release"), &[])
        .await;
    let strangers_claim = claim(&stranger).await;
    let nonsense = visitor.get("/review/items/not-an-id").await;

    for res in [
        &forged_claim,
        &forged_decide,
        &forged_release,
        &forged_media,
    ] {
        assert_eq!(res.status(), 403);
    }
    for res in [
        &strangers_view,
        &strangers_decide,
        &strangers_release,
        &nonsense,
    ] {
        assert_eq!(res.status(), 404);
    }
    assert_eq!(strangers_claim, "/review?empty=1");
    let queue = visitor.page("/review").await;
    assert_eq!(testid(&queue, "queue-claimed"), "1");
    assert!(
        visitor
            .page("/review")
            .await
            .contains("Show media unblurred"),
        "the setting is unchanged"
    );
}
