//! The URL guard's table: what must be refused and what must pass.

use std::{collections::HashMap, net::IpAddr, sync::Arc};

use moderation_shared::url_guard::{OverrideResolver, SystemResolver, UrlError, UrlGuard, UrlUse};

fn guard() -> UrlGuard {
    let fixed: HashMap<String, Vec<IpAddr>> = [
        ("evil.test", vec!["127.0.0.1"]),
        ("metadata.test", vec!["169.254.169.254"]),
        ("rebind.test", vec!["93.184.215.14", "10.0.0.1"]),
        ("v6.test", vec!["::1"]),
        ("public.test", vec!["93.184.215.14"]),
        ("public6.test", vec!["2606:4700:4700::1111"]),
    ]
    .into_iter()
    .map(|(name, ips)| {
        (
            name.to_owned(),
            ips.into_iter().map(|ip| ip.parse().unwrap()).collect(),
        )
    })
    .collect();
    UrlGuard::new(
        Arc::new(OverrideResolver::new(fixed, Arc::new(SystemResolver))),
        false,
    )
}

const REFUSED_MEDIA: &[(&str, UrlError)] = &[
    (
        "ftp://93.184.215.14/x.png",
        UrlError::Scheme("http or https"),
    ),
    ("file:///etc/passwd", UrlError::Scheme("http or https")),
    ("gopher://93.184.215.14/", UrlError::Scheme("http or https")),
    ("javascript:alert(1)", UrlError::Scheme("http or https")),
    ("data:text/plain,hello", UrlError::Scheme("http or https")),
    ("not a url", UrlError::Malformed),
    ("/relative/path.png", UrlError::Malformed),
    ("http://user:secret@93.184.215.14/x.png", UrlError::Userinfo),
    ("http://user@93.184.215.14/x.png", UrlError::Userinfo),
    ("http://127.0.0.1/x.png", UrlError::NotPublic),
    ("http://127.1/x.png", UrlError::NotPublic),
    ("http://2130706433/x.png", UrlError::NotPublic),
    ("http://0x7f000001/x.png", UrlError::NotPublic),
    ("http://017700000001/x.png", UrlError::NotPublic),
    ("http://0177.0.0.1/x.png", UrlError::NotPublic),
    ("http://0x7f.0.0.1/x.png", UrlError::NotPublic),
    ("http://0/x.png", UrlError::NotPublic),
    ("http://0.0.0.0:8080/x.png", UrlError::NotPublic),
    ("http://10.0.0.1/x.png", UrlError::NotPublic),
    ("http://172.16.5.4/x.png", UrlError::NotPublic),
    ("http://192.168.0.1/x.png", UrlError::NotPublic),
    (
        "http://169.254.169.254/latest/meta-data/",
        UrlError::NotPublic,
    ),
    ("http://100.64.0.1/x.png", UrlError::NotPublic),
    ("http://100.100.100.200/x.png", UrlError::NotPublic),
    ("http://224.0.0.1/x.png", UrlError::NotPublic),
    ("http://255.255.255.255/x.png", UrlError::NotPublic),
    ("http://192.0.2.1/x.png", UrlError::NotPublic),
    ("http://198.18.0.1/x.png", UrlError::NotPublic),
    ("http://[::1]/x.png", UrlError::NotPublic),
    ("http://[::]/x.png", UrlError::NotPublic),
    ("http://[::ffff:127.0.0.1]/x.png", UrlError::NotPublic),
    ("http://[::ffff:a9fe:a9fe]/x.png", UrlError::NotPublic),
    ("http://[64:ff9b::7f00:1]/x.png", UrlError::NotPublic),
    ("http://[2002:c0a8:0101::1]/x.png", UrlError::NotPublic),
    ("http://[fc00::1]/x.png", UrlError::NotPublic),
    ("http://[fd00:ec2::254]/x.png", UrlError::NotPublic),
    ("http://[fe80::1]/x.png", UrlError::NotPublic),
    ("http://[ff02::1]/x.png", UrlError::NotPublic),
    ("http://[2001:db8::1]/x.png", UrlError::NotPublic),
    ("http://localhost/x.png", UrlError::NotPublic),
    ("http://LOCALHOST./x.png", UrlError::NotPublic),
    ("http://evil.test/x.png", UrlError::NotPublic),
    ("http://EVIL.test./x.png", UrlError::NotPublic),
    (
        "http://metadata.test/computeMetadata/v1/",
        UrlError::NotPublic,
    ),
    ("http://rebind.test/x.png", UrlError::NotPublic),
    ("http://v6.test/x.png", UrlError::NotPublic),
    (
        "http://does-not-exist.invalid/x.png",
        UrlError::Unresolvable,
    ),
];

const ALLOWED_MEDIA: &[&str] = &[
    "http://93.184.215.14/a.png",
    "https://93.184.215.14:8443/a.png?size=large#frag",
    "http://8.8.8.8/clip.mp4",
    "http://public.test/a.png",
    "HTTPS://PUBLIC.TEST/a.png",
    "https://public6.test/a.png",
    "https://[2606:4700:4700::1111]/a.png",
    "http://[::ffff:8.8.8.8]/a.png",
];

#[tokio::test]
async fn the_guard_refuses_every_non_public_or_malformed_url() {
    let guard = guard();
    assert!(REFUSED_MEDIA.len() >= 30);
    for (url, expected) in REFUSED_MEDIA {
        let refused = guard.check(url, UrlUse::Media).await.err();
        assert_eq!(refused.as_ref(), Some(expected), "{url}");
    }
}

#[tokio::test]
async fn the_guard_allows_public_http_and_https_urls() {
    let guard = guard();
    for url in ALLOWED_MEDIA {
        let checked = guard.check(url, UrlUse::Media).await;
        assert!(checked.is_ok(), "{url}: {checked:?}");
        assert!(!checked.unwrap().addrs.is_empty());
    }
}

#[tokio::test]
async fn webhook_urls_must_be_https_and_public() {
    let guard = guard();

    assert_eq!(
        guard
            .check("http://93.184.215.14/hook", UrlUse::Webhook)
            .await
            .err(),
        Some(UrlError::Scheme("https"))
    );
    assert_eq!(
        guard
            .check("https://evil.test/hook", UrlUse::Webhook)
            .await
            .err(),
        Some(UrlError::NotPublic)
    );
    assert!(guard
        .check("https://public.test/hook", UrlUse::Webhook)
        .await
        .is_ok());
}

#[tokio::test]
async fn resolved_addresses_carry_the_default_or_given_port() {
    let guard = guard();

    let http = guard
        .check("http://public.test/a", UrlUse::Media)
        .await
        .unwrap();
    let https = guard
        .check("https://public.test:9443/a", UrlUse::Media)
        .await
        .unwrap();

    assert_eq!(http.addrs[0].to_string(), "93.184.215.14:80");
    assert_eq!(https.addrs[0].to_string(), "93.184.215.14:9443");
}

#[tokio::test]
async fn allowing_private_urls_lets_loopback_through_but_keeps_the_scheme_rules() {
    let guard = UrlGuard::system(true);

    assert!(guard
        .check("http://127.0.0.1:9/x.png", UrlUse::Media)
        .await
        .is_ok());
    assert_eq!(
        guard.check("ftp://127.0.0.1/x", UrlUse::Media).await.err(),
        Some(UrlError::Scheme("http or https"))
    );
}
