//! Signing in and out, the session cookie, CSRF, the lockout and the security headers.

use moderation_tests::{
    dashboard::{csrf_of, location},
    spawn_app, spawn_app_with,
};

#[tokio::test]
async fn signing_in_opens_the_overview_and_signing_out_ends_the_session() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let user = app.create_user(app.create_account().await, false).await;
    let visitor = dashboard.visitor();

    let form = visitor.page("/login").await;
    assert!(
        form.contains(r#"<label for="email">Email</label>"#),
        "{form}"
    );
    assert!(
        form.contains(r#"<label for="password">Password</label>"#),
        "{form}"
    );
    assert!(form.contains(">Sign in</button>"), "{form}");
    let signed_in = visitor.sign_in(&user.email, &user.password).await;
    assert_eq!(signed_in.status(), 303);
    assert_eq!(location(&signed_in), "/");
    let overview = visitor.page("/").await;
    assert!(overview.contains(&user.email), "{overview}");

    let out = visitor.post("/", "/logout", &[]).await;
    assert_eq!(out.status(), 303);
    assert_eq!(location(&out), "/login");
    let after = visitor.get("/").await;
    assert_eq!(after.status(), 303);
    assert_eq!(location(&after), "/login");
}

#[tokio::test]
async fn pages_without_a_session_redirect_to_the_sign_in_page() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let visitor = dashboard.visitor();

    for path in ["/", "/keys", "/jobs", "/submit", "/staff/accounts"] {
        let res = visitor.get(path).await;
        assert_eq!(res.status(), 303, "{path}");
        assert_eq!(location(&res), "/login", "{path}");
    }
}

#[tokio::test]
async fn a_wrong_password_is_refused_with_one_message_for_every_cause() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let user = app.create_user(app.create_account().await, false).await;
    let visitor = dashboard.visitor();

    let wrong = visitor.sign_in(&user.email, "not the password").await;
    let unknown = visitor.sign_in("nobody@example.com", &user.password).await;

    for res in [wrong, unknown] {
        assert_eq!(res.status(), 401);
        assert!(res.headers().get("set-cookie").is_some());
        let body = res.text().await.unwrap();
        assert!(body.contains("Wrong email or password."), "{body}");
    }
    assert_eq!(visitor.get("/").await.status(), 303);
}

#[tokio::test]
async fn the_session_cookie_is_http_only_strict_and_secure_unless_told_otherwise() {
    let app = spawn_app().await;
    let secure = app
        .spawn_dashboard_with(|s| s.insecure_cookies = false)
        .await;
    let user = app.create_user(app.create_account().await, false).await;

    // Over plain HTTP the client keeps no Secure cookie, so post the form's token by hand.
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let form = client.get(secure.url("/login")).send().await.unwrap();
    let sign_in_cookie = form.headers()["set-cookie"].to_str().unwrap().to_owned();
    let token = csrf_of(&form.text().await.unwrap());
    let cookie_pair = sign_in_cookie.split(';').next().unwrap().to_owned();
    let res = client
        .post(secure.url("/login"))
        .header("cookie", cookie_pair)
        .form(&[
            ("csrf", token.as_str()),
            ("email", &user.email),
            ("password", &user.password),
        ])
        .send()
        .await
        .unwrap();

    assert_eq!(res.status(), 303);
    let session = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("dashboard_session="))
        .expect("session cookie");
    assert!(session.contains("HttpOnly"), "{session}");
    assert!(session.contains("SameSite=Strict"), "{session}");
    assert!(session.contains("Secure"), "{session}");
    assert!(sign_in_cookie.contains("Secure"), "{sign_in_cookie}");

    let insecure = app.spawn_dashboard().await;
    let res = insecure
        .visitor()
        .sign_in(&user.email, &user.password)
        .await;
    let session = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(!session.contains("Secure"), "{session}");
    assert!(session.contains("HttpOnly") && session.contains("SameSite=Strict"));
}

#[tokio::test]
async fn a_form_posted_without_its_csrf_token_is_refused_and_does_nothing() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let user = app.create_user(app.create_account().await, false).await;
    let visitor = dashboard.signed_in(&user).await;

    let missing = visitor
        .post_raw("/keys", &[("name", "sneaky"), ("scope", "job:read")])
        .await;
    let wrong = visitor
        .post_raw(
            "/keys",
            &[("csrf", "0000"), ("name", "sneaky"), ("scope", "job:read")],
        )
        .await;
    let sign_out = visitor.post_raw("/logout", &[]).await;
    let sign_in = dashboard
        .visitor()
        .post_raw(
            "/login",
            &[("email", &user.email), ("password", &user.password)],
        )
        .await;

    for res in [missing, wrong, sign_out, sign_in] {
        assert_eq!(res.status(), 403);
    }
    let keys = visitor.page("/keys").await;
    assert!(!keys.contains("sneaky"), "{keys}");
    assert!(keys.contains("No keys yet"), "{keys}");
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let visitor = dashboard.visitor();

    for path in ["/login", "/", "/static/dashboard.css", "/nowhere"] {
        let res = visitor.get(path).await;
        let header = |name: &str| {
            res.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        let csp = header("content-security-policy");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("default-src 'none'"), "{path}: {csp}");
        assert!(csp.contains("style-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert!(header("server-timing").starts_with("app;dur="), "{path}");
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "no-referrer", "{path}");
    }
    let page = visitor.page("/login").await;
    let scripts: Vec<&str> = page.split("<script").skip(1).collect();
    assert_eq!(scripts.len(), 1, "{page}");
    assert!(
        scripts[0].starts_with(r#" src="/static/local-time.js" defer></script>"#),
        "only the embedded file, no inline script: {page}"
    );
    assert!(!page.contains("style="), "no inline style");
    let script = visitor.get("/static/local-time.js").await;
    assert_eq!(script.status(), 200);
    assert!(script.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert!(script.text().await.unwrap().contains("time[datetime]"));
}

#[tokio::test]
async fn timestamps_carry_their_utc_instant_and_a_utc_title() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;
    let account = app.create_account().await;
    let job = moderation_tests::fixtures::JobRow::new(
        account,
        "text",
        "x",
        time::macros::datetime!(2026-03-01 12:34:56 UTC),
    );
    job.insert(&app.db.pool).await;
    let visitor = dashboard
        .signed_in(&app.create_user(account, false).await)
        .await;

    let page = visitor.page(&format!("/jobs/{}", job.id)).await;

    assert!(
        page.contains(
            r#"<time datetime="2026-03-01T12:34:56Z" title="2026-03-01 12:34:56 UTC">2026-03-01 12:34:56 UTC</time>"#
        ),
        "{page}"
    );
}

#[tokio::test]
async fn failed_sign_ins_lock_the_address_out_of_the_dashboard_and_the_api() {
    let app = spawn_app_with(|s| s.limits.auth_failure_limit = 3).await;
    let dashboard = app
        .spawn_dashboard_with(|s| s.limits.auth_failure_limit = 3)
        .await;
    let account = app.create_account().await;
    let user = app.create_user(account, false).await;
    let key = app.create_key(account, None).await;
    let visitor = dashboard.visitor();

    for _ in 0..3 {
        let res = visitor.sign_in(&user.email, "wrong password!").await;
        assert_eq!(res.status(), 401);
    }
    let locked = visitor.sign_in(&user.email, &user.password).await;
    let api = app.get("/api/v1/me", &key).await;

    assert_eq!(locked.status(), 429);
    assert!(locked.headers().get("retry-after").is_some());
    assert!(locked
        .text()
        .await
        .unwrap()
        .contains("Too many failed sign-ins"));
    assert_eq!(api.status(), 429, "the lockout is the api's too");
}

#[tokio::test]
async fn the_dashboard_serves_prometheus_text_like_every_process() {
    let app = spawn_app().await;
    let dashboard = app.spawn_dashboard().await;

    let res = dashboard.visitor().get("/metrics").await;

    assert_eq!(res.status(), 200);
    let text = res.text().await.unwrap();
    assert!(
        text.contains(r#"process_up{process="dashboard"} 1"#),
        "{text}"
    );
}
