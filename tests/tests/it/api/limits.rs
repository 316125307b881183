use std::time::Duration;

use moderation_shared::{config::RedisSettings, keys};
use moderation_tests::{assert_error, eventually, spawn_app_with, TestApp, TestKey};

const BAD_KEY: &str = "Bearer msk_aaaaaaaa_this-key-is-not-well-formed";

fn header(response: &reqwest::Response, name: &str) -> Option<u64> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().parse().unwrap())
}

/// `(limit, remaining, reset)` of a response.
fn rate_headers(response: &reqwest::Response) -> (u64, u64, u64) {
    (
        header(response, "x-ratelimit-limit").expect("x-ratelimit-limit"),
        header(response, "x-ratelimit-remaining").expect("x-ratelimit-remaining"),
        header(response, "x-ratelimit-reset").expect("x-ratelimit-reset"),
    )
}

async fn me_with(app: &TestApp, authorization: &str, forwarded: Option<&str>) -> reqwest::Response {
    let mut request = app
        .client
        .get(app.url("/api/v1/me"))
        .header("authorization", authorization);
    if let Some(forwarded) = forwarded {
        request = request.header("x-forwarded-for", forwarded);
    }
    request.send().await.unwrap()
}

async fn me(app: &TestApp, key: &TestKey) -> reqwest::Response {
    app.get("/api/v1/me", key).await
}

#[tokio::test]
async fn the_seventh_request_in_a_burst_window_is_429_and_counts_nothing() {
    // A 5 s burst window keeps the test exact on a loaded machine; the limit is the default 6.
    let app = spawn_app_with(|s| s.limits.burst_window = Duration::from_secs(5)).await;
    let key = app.account_with_key(None).await;

    for n in 1..=6u64 {
        let response = me(&app, &key).await;
        assert_eq!(response.status(), 200, "request {n}");
        let (limit, remaining, reset) = rate_headers(&response);
        assert_eq!((limit, remaining), (6, 6 - n), "request {n}");
        assert!((1..=5).contains(&reset), "reset {reset}");
    }
    let refused = me(&app, &key).await;

    assert_eq!(rate_headers(&refused).0, 6);
    assert_eq!(rate_headers(&refused).1, 0);
    let retry_after = header(&refused, "retry-after").expect("retry-after");
    assert!((1..=5).contains(&retry_after), "retry-after {retry_after}");
    assert_error(refused, 429, "RATE_LIMITED").await;
    let admitted = eventually(Duration::from_secs(20), "the next burst window", || async {
        let response = me(&app, &key).await;
        (response.status() == 200).then_some(response)
    })
    .await;
    let (limit, remaining, _) = rate_headers(&admitted);
    assert_eq!(
        (limit, remaining),
        (6, 5),
        "refused requests consumed nothing of the minute either"
    );
}

#[tokio::test]
async fn the_sixty_first_request_in_a_minute_is_429_with_coherent_headers() {
    // A short burst window lets 60 requests fit in the minute quickly; requests the burst
    // window refuses are retried and, being refused, consume nothing.
    let app = spawn_app_with(|s| s.limits.burst_window = Duration::from_millis(50)).await;
    let key = app.account_with_key(None).await;

    for n in 1..=60u64 {
        let admitted = eventually(
            Duration::from_secs(10),
            "a burst window with room",
            || async {
                let response = me(&app, &key).await;
                if response.status() == 429 {
                    assert_eq!(
                        rate_headers(&response).0,
                        6,
                        "only the burst window refuses"
                    );
                    return None;
                }
                Some(response)
            },
        )
        .await;
        assert_eq!(admitted.status(), 200, "request {n}");
        let (limit, remaining, reset) = rate_headers(&admitted);
        match limit {
            60 => assert_eq!(remaining, 60 - n, "request {n}"),
            6 => assert!(remaining <= 60 - n, "request {n}: the tighter window"),
            other => panic!("unexpected limit {other}"),
        }
        assert!((1..=60).contains(&reset), "reset {reset}");
        if n == 60 {
            assert_eq!((limit, remaining), (60, 0));
        }
    }
    let refused = me(&app, &key).await;

    assert_eq!(rate_headers(&refused).0, 60);
    assert_eq!(rate_headers(&refused).1, 0);
    let retry_after = header(&refused, "retry-after").expect("retry-after");
    assert!((1..=60).contains(&retry_after), "retry-after {retry_after}");
    assert_eq!(header(&refused, "x-ratelimit-reset"), Some(retry_after));
    assert_error(refused, 429, "RATE_LIMITED").await;
}

#[tokio::test]
async fn rate_limit_headers_come_with_authenticated_refusals_too() {
    let app = spawn_app_with(|_| {}).await;
    let key = app
        .account_with_key(Some(&[moderation_shared::domain::Scope::JobRead]))
        .await;

    let response = app.get("/api/v1/usage/volume", &key).await;

    assert_eq!(rate_headers(&response).0, 6);
    assert_error(response, 403, "FORBIDDEN").await;
}

#[tokio::test]
async fn fifty_failed_authentications_lock_the_address_out_until_the_window_ends() {
    let app = spawn_app_with(|s| s.limits.auth_failure_window = Duration::from_secs(10)).await;
    let key = app.account_with_key(None).await;

    for n in 1..=49 {
        let response = me_with(&app, BAD_KEY, None).await;
        assert_eq!(response.status(), 401, "failure {n}");
    }
    assert_eq!(
        me(&app, &key).await.status(),
        200,
        "49 failures do not lock"
    );
    assert_error(me_with(&app, BAD_KEY, None).await, 401, "UNAUTHORIZED").await;

    let locked = me(&app, &key).await;
    let retry_after = header(&locked, "retry-after").expect("retry-after");
    assert!((1..=10).contains(&retry_after), "retry-after {retry_after}");
    assert_error(locked, 429, "RATE_LIMITED").await;
    assert_error(me_with(&app, BAD_KEY, None).await, 429, "RATE_LIMITED").await;
    let unknown = format!("Bearer {}", keys::generate().unwrap().key);
    assert_error(me_with(&app, &unknown, None).await, 429, "RATE_LIMITED").await;
    let health = app.client.get(app.url("/health")).send().await.unwrap();
    assert_eq!(health.status(), 200, "public endpoints are not locked");

    eventually(Duration::from_secs(30), "the lock to lift", || async {
        (me(&app, &key).await.status() == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_lock_applies_to_the_forwarded_address() {
    let app = spawn_app_with(|s| {
        s.trusted_proxies = "127.0.0.1".parse().unwrap();
        s.limits.auth_failure_limit = 3;
    })
    .await;
    let key = app.account_with_key(None).await;
    let bearer = format!("Bearer {}", key.key);

    for _ in 0..3 {
        let response = me_with(&app, BAD_KEY, Some("203.0.113.5, 198.51.100.1")).await;
        assert_eq!(response.status(), 401);
    }

    let locked = me_with(&app, &bearer, Some("198.51.100.1")).await;
    assert_error(locked, 429, "RATE_LIMITED").await;
    let other = me_with(&app, &bearer, Some("198.51.100.2")).await;
    assert_eq!(
        other.status(),
        200,
        "another client behind the proxy is not locked"
    );
    let direct = me_with(&app, &bearer, None).await;
    assert_eq!(direct.status(), 200, "the proxy itself is not locked");
}

#[tokio::test]
async fn without_trusted_proxies_a_forwarded_header_cannot_dodge_the_lock() {
    let app = spawn_app_with(|s| s.limits.auth_failure_limit = 3).await;
    let key = app.account_with_key(None).await;

    for n in 0..3 {
        let forwarded = format!("198.51.100.{n}");
        let response = me_with(&app, BAD_KEY, Some(&forwarded)).await;
        assert_eq!(response.status(), 401);
    }

    let locked = me_with(&app, &format!("Bearer {}", key.key), Some("203.0.113.9")).await;
    assert_error(locked, 429, "RATE_LIMITED").await;
}

/// A request whose key lookup will wait for the test's lock on `api_keys`.
fn stuck_request(app: &TestApp) -> tokio::task::JoinHandle<reqwest::StatusCode> {
    let request = app
        .client
        .get(app.url("/api/v1/me"))
        .bearer_auth(keys::generate().unwrap().key);
    tokio::spawn(async move { request.send().await.unwrap().status() })
}

#[tokio::test]
async fn the_fifty_first_concurrent_authenticating_request_is_429_at_once() {
    let app = spawn_app_with(|s| {
        s.limits.auth_failure_limit = 10_000;
        s.database.acquire_timeout = Duration::from_secs(60);
    })
    .await;
    // Key lookups block on this lock, so 50 requests stay mid-authentication.
    let mut blocker = app.db.pool.get().await.unwrap();
    let lock = blocker.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let mut stuck: Vec<_> = (0..50).map(|_| stuck_request(&app)).collect();

    // A malformed key needs no lookup: it is answered 401 at once until 50 are in flight. A
    // probe may take a slot just as the 50th arrives; that one is refused and sent again.
    let started = std::time::Instant::now();
    let refused = loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "50 never in flight"
        );
        let mut replaced = false;
        for request in &mut stuck {
            if request.is_finished() {
                assert_eq!((&mut *request).await.unwrap(), 429);
                *request = stuck_request(&app);
                replaced = true;
            }
        }
        if replaced {
            // Give the replacement time to take its slot before probing again.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let response = me_with(&app, BAD_KEY, None).await;
        if response.status() == 429 {
            break response;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "50 never in flight"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    assert_eq!(header(&refused, "retry-after"), Some(1));
    let body = assert_error(refused, 429, "RATE_LIMITED").await;
    assert!(
        body["message"].as_str().unwrap().contains("concurrent"),
        "{body}"
    );
    lock.rollback().await.unwrap();
    for request in stuck {
        assert_eq!(request.await.unwrap(), 401);
    }
    assert_error(me_with(&app, BAD_KEY, None).await, 401, "UNAUTHORIZED").await;
}

#[tokio::test]
async fn when_redis_is_down_requests_are_admitted_without_rate_limit_headers() {
    let app = spawn_app_with(|s| {
        s.redis = RedisSettings::new("redis://127.0.0.1:1", "unreachable");
        s.limits.auth_failure_limit = 2;
    })
    .await;
    let key = app.account_with_key(None).await;

    for _ in 0..3 {
        assert_error(me_with(&app, BAD_KEY, None).await, 401, "UNAUTHORIZED").await;
    }
    let response = me(&app, &key).await;

    assert_eq!(response.status(), 200, "the limits fail open");
    assert!(response.headers().get("x-ratelimit-limit").is_none());
}
