//! What images, videos and audio send: data URLs of their bytes, the NSFW question only when
//! the check is on, and audio as a multipart upload whose transcript is then checked.

use std::time::Duration;

use base64::Engine as _;
use moderation_tests::openai::{ModelReply, ModelServer};
use moderation_worker::classify::openai::VisualKind;
use serde_json::json;

use super::{
    content_part, media, policy, prompt, provider, provider_with, required, MP3, MP4, PNG,
};

#[tokio::test]
async fn an_image_goes_as_a_data_url_of_its_bytes_with_its_type() {
    // Arrange
    let server = ModelServer::start().await;
    let provider = provider(&server);
    let image = media(PNG, Some("application/octet-stream"));

    // Act
    let verdict = provider
        .check_visual(VisualKind::Image, &image, &policy(true, &[]))
        .await
        .unwrap();

    // Assert
    let request = &server.requests()[0];
    assert_eq!(request.chat()["model"], "test-vision");
    let url = content_part(request, "image_url")["image_url"]["url"]
        .as_str()
        .unwrap();
    let encoded = url.strip_prefix("data:image/png;base64,").expect(url);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    assert_eq!(decoded, PNG);
    let body = request.chat().to_string();
    assert!(!body.contains("http://") && !body.contains("https://"));
    assert!(!verdict.prohibited);
    assert!(verdict.visual.is_some());
}

#[tokio::test]
async fn a_video_goes_whole_as_a_video_url_data_url() {
    // Arrange
    let server = ModelServer::start().await;
    let provider = provider(&server);
    let video = media(MP4, Some("video/mp4"));

    // Act
    provider
        .check_visual(VisualKind::Video, &video, &policy(false, &[]))
        .await
        .unwrap();

    // Assert
    let request = &server.requests()[0];
    let url = content_part(request, "video_url")["video_url"]["url"]
        .as_str()
        .unwrap();
    let encoded = url.strip_prefix("data:video/mp4;base64,").expect(url);
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    assert_eq!(decoded, MP4);
    assert!(request.system_prompt().contains("video"));
}

#[tokio::test]
async fn a_large_image_is_streamed_with_its_exact_length_on_every_try() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::Error {
            status: 503,
            code: "overloaded",
        }],
        ModelReply::Pass,
    );
    let provider = provider_with(&server, |s| s.retry_base = Duration::from_millis(10));
    // Several encoding chunks, and not a multiple of 3.
    let mut bytes = PNG.to_vec();
    bytes.extend((0..400_000u32).map(|i| (i % 253) as u8));
    let image = media(&bytes, Some("image/png"));

    // Act
    provider
        .check_visual(VisualKind::Image, &image, &policy(true, &[]))
        .await
        .unwrap();

    // Assert
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(request.headers.get("transfer-encoding").is_none());
        let length: usize = request.headers["content-length"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(length > bytes.len() / 3 * 4, "{length}");
        let url = content_part(request, "image_url")["image_url"]["url"]
            .as_str()
            .unwrap();
        let encoded = url
            .strip_prefix("data:image/png;base64,")
            .expect("a PNG data URL");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        assert!(decoded == bytes, "the image arrives whole");
    }
}

#[tokio::test]
async fn visual_check_neither_asks_nor_reads_nsfw_when_the_check_is_off() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::Verdict(json!({
            "reason": "",
            "ai_adult_general": false,
            "underage": false,
            "nsfw": true,
            "custom": { "weapons": false },
        }))],
        ModelReply::Pass,
    );
    let provider = provider(&server);
    let policy = policy(false, &[("weapons", "Shows firearms.")]);

    // Act
    let verdict = provider
        .check_visual(VisualKind::Image, &media(PNG, None), &policy)
        .await
        .unwrap();

    // Assert
    let request = &server.requests()[0];
    assert_eq!(
        required(request.schema()),
        ["reason", "ai_adult_general", "underage", "custom"]
    );
    assert!(!request.system_prompt().contains("nsfw"));
    assert!(!verdict.prohibited, "an nsfw answer is not evaluated");
    let visual = verdict.visual.unwrap();
    assert_eq!(visual.nsfw, None);
    assert_eq!(verdict.custom.len(), 1);
}

#[tokio::test]
async fn visual_check_asks_and_reads_nsfw_when_the_check_is_on() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::Verdict(json!({
            "reason": "Nudity.",
            "ai_adult_general": false,
            "underage": false,
            "nsfw": true,
        }))],
        ModelReply::Pass,
    );
    let provider = provider(&server);

    // Act
    let verdict = provider
        .check_visual(VisualKind::Image, &media(PNG, None), &policy(true, &[]))
        .await
        .unwrap();

    // Assert
    assert_eq!(
        required(server.requests()[0].schema()),
        ["reason", "ai_adult_general", "underage", "nsfw"]
    );
    assert!(verdict.prohibited);
    assert_eq!(verdict.reason.as_deref(), Some("Nudity."));
    assert_eq!(verdict.visual.unwrap().nsfw, Some(true));
}

#[tokio::test]
async fn audio_is_transcribed_from_a_multipart_upload_then_the_transcript_is_checked() {
    // Arrange
    let server = ModelServer::start().await;
    server.script(
        [ModelReply::Transcript(
            " Meet me at the casino. ".to_owned(),
        )],
        ModelReply::Pass,
    );
    let provider = provider(&server);
    let audio = media(MP3, None);
    let policy = policy(false, &[("gambling", "Betting.")]);

    // Act
    let transcript = provider.transcribe(&audio).await.unwrap();
    let verdict = provider
        .check_text(prompt(&transcript), &policy)
        .await
        .unwrap();

    // Assert
    assert_eq!(transcript, "Meet me at the casino.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let upload = &requests[0];
    assert_eq!(upload.path, "/v1/audio/transcriptions");
    let file = upload.field("file").expect("file part");
    assert_eq!(file.data, MP3);
    assert_eq!(file.filename.as_deref(), Some("audio.mp3"));
    assert_eq!(file.content_type.as_deref(), Some("audio/mpeg"));
    assert_eq!(upload.field("model").unwrap().data, b"test-whisper");
    assert_eq!(upload.field("response_format").unwrap().data, b"json");
    assert_eq!(
        requests[1].chat()["messages"][1]["content"],
        "{\"text\":\"Meet me at the casino.\"}"
    );
    assert!(!verdict.prohibited);
    assert!(!verdict.custom["gambling"]);
}

#[tokio::test]
async fn audio_without_speech_gives_an_empty_transcript() {
    // Arrange
    let server = ModelServer::start().await;
    let provider = provider(&server);

    // Act
    let transcript = provider.transcribe(&media(MP3, None)).await.unwrap();

    // Assert
    assert_eq!(transcript, "");
}
