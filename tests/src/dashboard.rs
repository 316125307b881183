//! A dashboard running in the test process beside a [`TestApp`] (same database, Redis
//! namespace and sealing key), its users, and a cookie-keeping HTTP client that signs in the
//! way a browser does.

use moderation_dashboard::{Application, DashboardSettings};
use moderation_shared::{
    db::{audit_events::Actor, dashboard_users},
    domain::AccountId,
    passwords,
};
use reqwest::{header, Response};

use crate::TestApp;

/// A running dashboard.
pub struct TestDashboard {
    /// `http://127.0.0.1:PORT`.
    pub address: String,
}

/// A dashboard user made for a test.
#[derive(Debug, Clone)]
pub struct TestUser {
    /// Its account.
    pub account: AccountId,
    /// Its id.
    pub user_id: uuid::Uuid,
    /// Its sign-in address.
    pub email: String,
    /// Its password.
    pub password: String,
}

impl TestApp {
    /// Starts a dashboard on this app's database and Redis namespace. Its registry key is its
    /// own (the api's is not kept): entries it reports match its own checks.
    pub async fn spawn_dashboard(&self) -> TestDashboard {
        self.spawn_dashboard_with(|_| {}).await
    }

    /// Starts a dashboard after `adjust` has changed its settings.
    pub async fn spawn_dashboard_with(
        &self,
        adjust: impl FnOnce(&mut DashboardSettings),
    ) -> TestDashboard {
        let mut settings = DashboardSettings::for_local(
            self.db.settings.clone(),
            self.redis.clone(),
            self.encryption_key.clone(),
            moderation_shared::registry::RegistryKey::random().expect("random key"),
        );
        // Loopback receivers and media servers.
        settings.url_guard = moderation_shared::url_guard::UrlGuard::system(true);
        adjust(&mut settings);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let app = Application::build_with_listener(settings, listener).expect("build dashboard");
        let port = app.port();
        tokio::spawn(app.run_until_stopped());
        TestDashboard {
            address: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Starts a dashboard and signs a visitor in as a new user (`staff` or not) of a new
    /// account: the start of most dashboard tests. The account and the visitor.
    pub async fn signed_in_dashboard(&self, staff: bool) -> (AccountId, Visitor) {
        let dashboard = self.spawn_dashboard().await;
        let account = self.create_account().await;
        let user = self.create_user(account, staff).await;
        (account, dashboard.signed_in(&user).await)
    }

    /// A dashboard user of `account` with a random address and password.
    pub async fn create_user(&self, account: AccountId, staff: bool) -> TestUser {
        let email = format!("user-{}@example.com", uuid::Uuid::new_v4().simple());
        let password = format!("pw-{}", uuid::Uuid::new_v4().simple());
        let hash = passwords::hash(&password).expect("hash");
        let client = self.db.pool.get().await.expect("connect");
        let id = dashboard_users::insert(&client, Actor::Operator, account, &email, &hash, staff)
            .await
            .expect("insert user");
        TestUser {
            account,
            user_id: id.0,
            email,
            password,
        }
    }
}

impl TestDashboard {
    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    /// A client with its own cookie jar, following no redirects.
    pub fn visitor(&self) -> Visitor {
        Visitor {
            base: self.address.clone(),
            client: reqwest::Client::builder()
                .cookie_store(true)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
        }
    }

    /// A visitor signed in as `user`.
    pub async fn signed_in(&self, user: &TestUser) -> Visitor {
        let visitor = self.visitor();
        let res = visitor.sign_in(&user.email, &user.password).await;
        assert_eq!(res.status(), 303, "sign-in of {}", user.email);
        visitor
    }
}

/// One browser-like client of the dashboard.
pub struct Visitor {
    base: String,
    /// The client (its cookie jar holds the session).
    pub client: reqwest::Client,
}

impl Visitor {
    /// `GET path`.
    pub async fn get(&self, path: &str) -> Response {
        self.client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("GET")
    }

    /// `GET path`, asserting a 200, and its body.
    pub async fn page(&self, path: &str) -> String {
        let res = self.get(path).await;
        assert_eq!(res.status(), 200, "GET {path}");
        res.text().await.expect("body")
    }

    /// `POST path` with `fields` as a form, exactly as given (no CSRF token added).
    pub async fn post_raw(&self, path: &str, fields: &[(&str, &str)]) -> Response {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        self.client
            .post(format!("{}{path}", self.base))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("POST")
    }

    /// `POST path` with `fields` and the CSRF token of the page at `from`, as its form does.
    pub async fn post(&self, from: &str, path: &str, fields: &[(&str, &str)]) -> Response {
        let token = csrf_of(&self.page(from).await);
        let mut all = vec![("csrf", token.as_str())];
        all.extend_from_slice(fields);
        self.post_raw(path, &all).await
    }

    /// Signs in with the sign-in form.
    pub async fn sign_in(&self, email: &str, password: &str) -> Response {
        self.post(
            "/login",
            "/login",
            &[("email", email), ("password", password)],
        )
        .await
    }
}

/// The CSRF token in the first form of `html`.
pub fn csrf_of(html: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let start = html.find(marker).expect("a form with a CSRF token") + marker.len();
    html[start..].split('"').next().expect("token").to_owned()
}

/// The `Location` of a redirect.
pub fn location(res: &Response) -> String {
    res.headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The path of the page's `Older …` link (`data-testid="next-page"`), unescaped; `None` on the
/// last page.
pub fn next_page(html: &str) -> Option<String> {
    let (before, _) = html.split_once(r#"data-testid="next-page""#)?;
    let href = before.rsplit_once(r#"href=""#)?.1.split('"').next()?;
    Some(href.replace("&#38;", "&").replace("&amp;", "&"))
}
