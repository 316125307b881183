//! The worker's media fetcher, audio probe and media hashes, against a local media server.

use std::time::Duration;

use moderation_shared::{
    media_hash,
    url_guard::{OverrideResolver, SystemResolver, UrlGuard},
};
use moderation_tests::media::{jpeg, png, wav, MediaServer};
use moderation_worker::{
    failure::Failure,
    fetch::{MediaFetcher, MAX_MEDIA_BYTES},
    probe::{audio_duration, MAX_AUDIO},
};

fn fetcher(deadline: Duration) -> MediaFetcher {
    MediaFetcher::new(UrlGuard::system(true), deadline, None).unwrap()
}

async fn failure(fetcher: &MediaFetcher, url: &str) -> Failure {
    fetcher.fetch(url).await.expect_err(url)
}

#[tokio::test]
async fn media_is_fetched_with_its_content_type() {
    let server = MediaServer::start().await;
    let url = server.add("a.png", png(1, 1), "image/PNG; charset=binary");

    let media = fetcher(Duration::from_secs(5)).fetch(&url).await.unwrap();

    assert_eq!(media.bytes, png(1, 1));
    assert_eq!(media.content_type.as_deref(), Some("image/png"));
}

#[tokio::test]
async fn three_redirects_are_followed_and_a_fourth_is_refused() {
    let server = MediaServer::start().await;
    server.add("a.png", png(1, 1), "image/png");
    let fetcher = fetcher(Duration::from_secs(5));

    let media = fetcher.fetch(&server.url("/hops/2/a.png")).await.unwrap();
    let err = failure(&fetcher, &server.url("/hops/3/a.png")).await;

    assert_eq!(media.bytes, png(1, 1));
    assert_eq!(
        (err.code.as_str(), err.retryable),
        ("MEDIA_UNREACHABLE", false)
    );
}

#[tokio::test]
async fn a_redirect_to_the_metadata_address_or_another_scheme_is_refused() {
    let server = MediaServer::start().await;
    let fetcher = fetcher(Duration::from_secs(5));

    for target in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://100.100.100.200/latest/meta-data/",
        "ftp://127.0.0.1/file",
        "file:///etc/passwd",
        "http://user:pass@127.0.0.1/",
    ] {
        let err = failure(&fetcher, &server.url(&format!("/to?{target}"))).await;
        assert_eq!(
            (err.code.as_str(), err.retryable),
            ("URL_NOT_ALLOWED", false),
            "{target}"
        );
    }
    assert_eq!(server.requests("/to"), 6, "only the first hop was fetched");
}

#[tokio::test]
async fn a_host_resolving_to_the_metadata_address_is_refused_even_with_private_urls_allowed() {
    let fixed = [(
        "metadata.test".to_owned(),
        vec!["169.254.169.254".parse().unwrap()],
    )];
    let resolver = OverrideResolver::new(
        fixed.into_iter().collect(),
        std::sync::Arc::new(SystemResolver),
    );
    let guard = UrlGuard::new(std::sync::Arc::new(resolver), true);
    let fetcher = MediaFetcher::new(guard, Duration::from_secs(5), None).unwrap();

    let err = failure(&fetcher, "http://metadata.test/latest/meta-data/").await;

    assert_eq!(err.code.as_str(), "URL_NOT_ALLOWED");
}

#[tokio::test]
async fn bodies_at_the_size_limit_pass_and_one_byte_more_is_too_large() {
    let server = MediaServer::start().await;
    let limit = 3 * 1024 * 1024 + 17;
    let fetcher = fetcher(Duration::from_secs(10)).with_max_bytes(limit);

    for declared in ["zeros", "zeros-chunked"] {
        let at = fetcher
            .fetch(&server.url(&format!("/{declared}/{limit}")))
            .await
            .unwrap();
        let over = failure(&fetcher, &server.url(&format!("/{declared}/{}", limit + 1))).await;
        assert_eq!(at.bytes.len() as u64, limit, "{declared}");
        assert_eq!(
            (over.code.as_str(), over.retryable),
            ("MEDIA_TOO_LARGE", false),
            "{declared}"
        );
    }
}

#[tokio::test]
async fn the_default_limit_is_100_mib_and_reading_stops_past_it() {
    let server = MediaServer::start().await;
    let fetcher = fetcher(Duration::from_secs(60));

    let err = failure(
        &fetcher,
        &server.url(&format!("/zeros-chunked/{}", MAX_MEDIA_BYTES + 1)),
    )
    .await;
    let declared = failure(
        &fetcher,
        &server.url(&format!("/zeros/{}", MAX_MEDIA_BYTES + 1)),
    )
    .await;

    assert_eq!(MAX_MEDIA_BYTES, 104_857_600);
    assert_eq!(err.code.as_str(), "MEDIA_TOO_LARGE");
    assert_eq!(declared.code.as_str(), "MEDIA_TOO_LARGE");
}

#[tokio::test]
async fn server_errors_are_worth_retrying_and_client_errors_are_not() {
    let server = MediaServer::start().await;
    let fetcher = fetcher(Duration::from_secs(5));

    for (code, retryable) in [
        (404, false),
        (403, false),
        (410, false),
        (429, true),
        (500, true),
        (503, true),
    ] {
        let err = failure(&fetcher, &server.url(&format!("/status/{code}"))).await;
        assert_eq!(
            (err.code.as_str(), err.retryable),
            ("MEDIA_UNREACHABLE", retryable),
            "{code}"
        );
    }
}

#[tokio::test]
async fn a_body_that_never_ends_is_cut_at_the_deadline() {
    let server = MediaServer::start().await;
    let started = std::time::Instant::now();

    let err = failure(&fetcher(Duration::from_millis(700)), &server.url("/slow")).await;

    assert_eq!(
        (err.code.as_str(), err.retryable),
        ("MEDIA_UNREACHABLE", true)
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_refused_connection_is_worth_retrying() {
    let port = moderation_tests::unused_port();
    let err = failure(
        &fetcher(Duration::from_secs(5)),
        &format!("http://127.0.0.1:{port}/a"),
    )
    .await;
    assert_eq!(
        (err.code.as_str(), err.retryable),
        ("MEDIA_UNREACHABLE", true)
    );
}

#[test]
fn audio_of_exactly_30_minutes_passes_and_a_sample_more_is_over() {
    assert_eq!(
        audio_duration(wav(8000, 8000 * 90).into()).unwrap(),
        Duration::from_secs(90)
    );
    assert!(audio_duration(wav(1000, 1000 * 30 * 60).into()).unwrap() <= MAX_AUDIO);
    assert!(audio_duration(wav(1000, 1000 * 30 * 60 + 1).into()).unwrap() > MAX_AUDIO);
}

#[test]
fn bytes_that_are_not_audio_are_unsupported() {
    let err = audio_duration(b"this is not audio at all".repeat(100).into()).unwrap_err();
    assert_eq!(
        (err.code.as_str(), err.retryable),
        ("MEDIA_UNSUPPORTED", false)
    );
}

#[test]
fn a_re_encoded_image_is_a_pdq_neighbour_and_another_image_is_far() {
    let original = media_hash::pdq(&png(10, 10)).unwrap();
    let re_encoded = media_hash::pdq(&jpeg(10, 10)).unwrap();
    let other = media_hash::pdq(&png(40, 40)).unwrap();

    assert_eq!(
        media_hash::hamming(&original, &media_hash::pdq(&png(10, 10)).unwrap()),
        0
    );
    assert!(media_hash::hamming(&original, &re_encoded) <= 31);
    assert!(media_hash::hamming(&original, &other) > 31);
    assert_ne!(
        media_hash::sha256(&png(10, 10)),
        media_hash::sha256(&jpeg(10, 10))
    );
    assert!(media_hash::pdq(b"not an image").is_err());
    assert_eq!(
        hex::encode(media_hash::sha256(b"abc")),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}
