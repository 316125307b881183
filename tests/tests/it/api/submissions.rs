use moderation_shared::domain::{Modality, Scope};
use moderation_tests::{
    assert_error,
    forms::{file_part, text_form},
    spawn_app, spawn_app_with, TestApp,
};
use reqwest::multipart::Form;
use serde_json::{json, Value};

const PUBLIC_IMAGE: &str = "http://93.184.215.14/cat.png";

async fn stored(app: &TestApp, id: uuid::Uuid) -> tokio_postgres::Row {
    let client = app.db.pool.get().await.unwrap();
    client
        .query_one(
            "SELECT j.type, j.status, j.content, j.messages, j.webhook_url, j.api_key_id, \
                    o.enqueued_at IS NOT NULL AS enqueued, o.status AS open_status \
             FROM jobs j LEFT JOIN open_jobs o ON o.job_id = j.id WHERE j.id = $1",
            &[&id],
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn a_prompt_is_persisted_enqueued_and_answered_202_queued() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    let response = app
        .submit("prompt", &key, text_form("text", "hello there"))
        .await;

    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "queued");
    let id: uuid::Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
    let row = stored(&app, id).await;
    assert_eq!(row.get::<_, &str>("type"), "text");
    assert_eq!(row.get::<_, &str>("status"), "queued");
    assert_eq!(row.get::<_, &str>("content"), "hello there");
    assert_eq!(
        row.get::<_, Option<uuid::Uuid>>("api_key_id"),
        Some(key.key_id)
    );
    assert!(row.get::<_, bool>("enqueued"));
    assert_eq!(row.get::<_, Option<&str>>("open_status"), Some("queued"));
    assert_eq!(app.stream_len(Modality::Text).await, 1);
}

#[tokio::test]
async fn text_is_accepted_up_to_256_kib_and_413_one_byte_over() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    let at_limit = app
        .submit("prompt", &key, text_form("text", "a".repeat(256 * 1024)))
        .await;
    let over = app
        .submit(
            "prompt",
            &key,
            text_form("text", "a".repeat(256 * 1024 + 1)),
        )
        .await;

    assert_eq!(at_limit.status(), 202);
    assert_error(over, 413, "PAYLOAD_TOO_LARGE").await;
}

#[tokio::test]
async fn text_must_be_present_non_empty_and_utf8() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    let missing = app.submit("prompt", &key, text_form("other", "x")).await;
    let empty = app.submit("prompt", &key, text_form("text", "")).await;
    let binary = app
        .submit(
            "prompt",
            &key,
            Form::new().part("text", reqwest::multipart::Part::bytes(vec![0xff, 0xfe])),
        )
        .await;
    let twice = app
        .submit(
            "prompt",
            &key,
            Form::new().text("text", "a").text("text", "b"),
        )
        .await;

    for response in [missing, empty, binary, twice] {
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn eight_non_file_fields_pass_and_nine_are_413() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let form = |fields: usize| {
        (1..fields).fold(text_form("text", "hi"), |form, i| {
            form.text(format!("extra{i}"), "x")
        })
    };

    let eight = app.submit("prompt", &key, form(8)).await;
    let nine = app.submit("prompt", &key, form(9)).await;

    assert_eq!(eight.status(), 202);
    assert_error(nine, 413, "PAYLOAD_TOO_LARGE").await;
}

#[tokio::test]
async fn a_non_file_field_may_hold_16384_utf8_bytes_and_one_more_is_400() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    // Two-byte characters: the limit counts UTF-8 bytes, not characters.
    let at_limit = "é".repeat(16_384 / 2);
    let over = format!("{at_limit}a");

    let ok = app
        .submit(
            "prompt",
            &key,
            text_form("text", "hi").text("note", at_limit),
        )
        .await;
    let refused = app
        .submit("prompt", &key, text_form("text", "hi").text("note", over))
        .await;

    assert_eq!(ok.status(), 202);
    assert_error(refused, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn a_body_that_is_not_multipart_is_415() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    let json = app
        .client
        .post(app.url("/api/v1/moderate/prompt"))
        .bearer_auth(&key.key)
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    let bare = app
        .client
        .post(app.url("/api/v1/moderate/image"))
        .bearer_auth(&key.key)
        .body("image=http://93.184.215.14/x.png")
        .send()
        .await
        .unwrap();

    assert_error(json, 415, "UNSUPPORTED_MEDIA_TYPE").await;
    assert_error(bare, 415, "UNSUPPORTED_MEDIA_TYPE").await;
}

fn messages(n: usize) -> String {
    let list: Vec<Value> = (0..n)
        .map(|i| {
            let role = ["user", "assistant", "system"][i % 3];
            json!({"role": role, "content": format!("message {i}")})
        })
        .collect();
    serde_json::to_string(&list).unwrap()
}

#[tokio::test]
async fn a_chat_is_stored_as_text_with_role_lines() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let body = r#"[{"role":"system","content":"be kind"},{"role":"user","content":"hi"}]"#;

    let response = app.submit("chat", &key, text_form("messages", body)).await;

    assert_eq!(response.status(), 202);
    let id = response.json::<Value>().await.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let row = stored(&app, id).await;
    assert_eq!(row.get::<_, &str>("type"), "text");
    assert_eq!(row.get::<_, &str>("content"), "system: be kind\nuser: hi");
    assert_eq!(
        row.get::<_, Value>("messages"),
        serde_json::from_str::<Value>(body).unwrap()
    );
}

#[tokio::test]
async fn a_chat_holds_1_to_500_messages_with_known_roles() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    // 500 short messages exceed 16 KiB, so they go as a file part.
    let as_file = |body: String| Form::new().part("messages", file_part(body, "messages.json"));

    let one = app
        .submit("chat", &key, text_form("messages", messages(1)))
        .await;
    let five_hundred = app.submit("chat", &key, as_file(messages(500))).await;
    let five_hundred_one = app.submit("chat", &key, as_file(messages(501))).await;
    let none = app.submit("chat", &key, text_form("messages", "[]")).await;
    let bad_role = app
        .submit(
            "chat",
            &key,
            text_form("messages", r#"[{"role":"robot","content":"x"}]"#),
        )
        .await;
    let extra_key = app
        .submit(
            "chat",
            &key,
            text_form("messages", r#"[{"role":"user","content":"x","name":"n"}]"#),
        )
        .await;
    let malformed = app.submit("chat", &key, text_form("messages", "[{")).await;
    let not_array = app
        .submit("chat", &key, text_form("messages", r#"{"role":"user"}"#))
        .await;
    let missing = app.submit("chat", &key, text_form("text", "x")).await;

    assert_eq!(one.status(), 202);
    assert_eq!(five_hundred.status(), 202);
    for response in [
        five_hundred_one,
        none,
        bad_role,
        extra_key,
        malformed,
        not_array,
        missing,
    ] {
        assert_error(response, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn chat_messages_as_a_file_part_may_be_256_kib_and_as_a_field_16384_bytes() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let padded = |len: usize| {
        let head = r#"[{"role":"user","content":""#;
        let tail = r#""}]"#;
        format!("{head}{}{tail}", "a".repeat(len - head.len() - tail.len()))
    };

    let file_at_limit = app
        .submit(
            "chat",
            &key,
            Form::new().part("messages", file_part(padded(256 * 1024), "m.json")),
        )
        .await;
    let file_over = app
        .submit(
            "chat",
            &key,
            Form::new().part("messages", file_part(padded(256 * 1024 + 1), "m.json")),
        )
        .await;
    let field_at_limit = app
        .submit("chat", &key, text_form("messages", padded(16_384)))
        .await;
    let field_over = app
        .submit("chat", &key, text_form("messages", padded(16_385)))
        .await;

    assert_eq!(file_at_limit.status(), 202);
    assert_error(file_over, 413, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(field_at_limit.status(), 202);
    assert_error(field_over, 400, "INVALID_REQUEST").await;
}

/// A form with one `messages` part per message, each a JSON object sent as
/// `application/json`, as clients generated from the OpenAPI document send an array.
fn message_parts(contents: &[String]) -> Form {
    contents.iter().fold(Form::new(), |form, content| {
        let message = json!({ "role": "user", "content": content }).to_string();
        form.part(
            "messages",
            reqwest::multipart::Part::text(message)
                .mime_str("application/json")
                .unwrap(),
        )
    })
}

#[tokio::test]
async fn a_chat_may_come_one_part_per_message_as_generated_clients_send_it() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let short = |n: usize| (0..n).map(|i| format!("m{i}")).collect::<Vec<_>>();
    // A part of 16,384 bytes: the JSON object around `len` bytes of content.
    let sized = |len: usize| "a".repeat(len - r#"{"role":"user","content":""}"#.len());

    let two = app.submit("chat", &key, message_parts(&short(2))).await;
    let lone = app.submit("chat", &key, message_parts(&short(1))).await;
    let five_hundred = app.submit("chat", &key, message_parts(&short(500))).await;
    let five_hundred_one = app.submit("chat", &key, message_parts(&short(501))).await;
    let at_byte_limit = app
        .submit("chat", &key, message_parts(&vec![sized(16_384); 16]))
        .await;
    let over_byte_limit = app
        .submit(
            "chat",
            &key,
            message_parts(&vec![sized(16_384); 16])
                .text("messages", r#"{"role":"user","content":""}"#),
        )
        .await;
    let with_seven_fields = app
        .submit(
            "chat",
            &key,
            (0..7).fold(message_parts(&short(3)), |f, i| {
                f.text(format!("x{i}"), "1")
            }),
        )
        .await;
    let with_eight_fields = app
        .submit(
            "chat",
            &key,
            (0..8).fold(message_parts(&short(3)), |f, i| {
                f.text(format!("x{i}"), "1")
            }),
        )
        .await;
    let array_among_parts = app
        .submit(
            "chat",
            &key,
            message_parts(&short(1)).text("messages", r#"[{"role":"user","content":"x"}]"#),
        )
        .await;
    let bad_role_part = app
        .submit(
            "chat",
            &key,
            message_parts(&short(1)).text("messages", r#"{"role":"robot","content":"x"}"#),
        )
        .await;

    assert_eq!(two.status(), 202);
    let id = two.json::<Value>().await.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let row = stored(&app, id).await;
    assert_eq!(row.get::<_, &str>("content"), "user: m0\nuser: m1");
    assert_eq!(
        row.get::<_, Value>("messages"),
        json!([{ "role": "user", "content": "m0" }, { "role": "user", "content": "m1" }])
    );
    assert_eq!(lone.status(), 202);
    assert_eq!(five_hundred.status(), 202);
    assert_error(five_hundred_one, 413, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(at_byte_limit.status(), 202);
    assert_error(over_byte_limit, 413, "PAYLOAD_TOO_LARGE").await;
    assert_eq!(with_seven_fields.status(), 202);
    assert_error(with_eight_fields, 413, "PAYLOAD_TOO_LARGE").await;
    assert_error(array_among_parts, 400, "INVALID_REQUEST").await;
    assert_error(bad_role_part, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn media_submissions_take_a_public_url_and_refuse_others() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;

    for (kind, modality) in [
        ("image", Modality::Image),
        ("video", Modality::Video),
        ("audio", Modality::Audio),
    ] {
        let ok = app.submit(kind, &key, text_form(kind, PUBLIC_IMAGE)).await;
        assert_eq!(ok.status(), 202, "{kind}");
        assert_eq!(app.stream_len(modality).await, 1, "{kind}");
        for bad in [
            "ftp://93.184.215.14/x",
            "http://127.0.0.1/x",
            "http://user:pw@93.184.215.14/x",
            "http://0x7f000001/x",
            "http://[::1]/x",
            "http://localhost/x",
            "not a url",
        ] {
            let refused = app.submit(kind, &key, text_form(kind, bad)).await;
            let body = assert_error(refused, 400, "INVALID_REQUEST").await;
            assert!(
                body["message"].as_str().unwrap().contains(kind),
                "{kind} {bad}: {body}"
            );
        }
        let missing = app
            .submit(kind, &key, text_form("other", PUBLIC_IMAGE))
            .await;
        assert_error(missing, 400, "INVALID_REQUEST").await;
        let upload = app
            .submit(
                kind,
                &key,
                Form::new().part(kind.to_owned(), file_part(vec![1, 2, 3], "x.bin")),
            )
            .await;
        assert_error(upload, 400, "INVALID_REQUEST").await;
    }
}

#[tokio::test]
async fn a_webhook_url_must_be_https_and_public() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    let with_hook = |hook: &str| text_form("text", "hi").text("webhook_url", hook.to_owned());

    let ok = app
        .submit("prompt", &key, with_hook("https://93.184.215.14/hook"))
        .await;
    let http = app
        .submit("prompt", &key, with_hook("http://93.184.215.14/hook"))
        .await;
    let private = app
        .submit("prompt", &key, with_hook("https://10.0.0.8/hook"))
        .await;

    assert_eq!(ok.status(), 202);
    let id = ok.json::<Value>().await.unwrap()["job_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        stored(&app, id).await.get::<_, Option<&str>>("webhook_url"),
        Some("https://93.184.215.14/hook")
    );
    assert_error(http, 400, "INVALID_REQUEST").await;
    assert_error(private, 400, "INVALID_REQUEST").await;
}

#[tokio::test]
async fn every_scoped_endpoint_refuses_a_key_without_its_scope() {
    let app = spawn_app().await;
    // The spec's client defaults lack moderate:audio, usage:read and webhook:manage.
    let defaults = app.create_key(app.create_account().await, None).await;
    let only_job_read = app.account_with_key(Some(&[Scope::JobRead])).await;

    let audio = app
        .submit("audio", &defaults, text_form("audio", PUBLIC_IMAGE))
        .await;
    let prompt = app
        .submit("prompt", &only_job_read, text_form("text", "hi"))
        .await;
    let jobs = app
        .get(
            "/api/v1/jobs",
            &app.account_with_key(Some(&[Scope::ModeratePrompt])).await,
        )
        .await;

    assert_error(audio, 403, "FORBIDDEN").await;
    assert_error(prompt, 403, "FORBIDDEN").await;
    assert_error(jobs, 403, "FORBIDDEN").await;
}

#[tokio::test]
async fn a_submission_during_a_redis_outage_keeps_the_job_and_answers_503_with_its_id() {
    let app = spawn_app_with(|s| s.redis = moderation_tests::unreachable_redis()).await;
    let key = app.account_with_key(None).await;

    let response = app.submit("prompt", &key, text_form("text", "hello")).await;

    let body = assert_error(response, 503, "SERVICE_UNAVAILABLE").await;
    let id: uuid::Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
    let row = stored(&app, id).await;
    assert_eq!(row.get::<_, &str>("status"), "queued");
    assert_eq!(row.get::<_, Option<&str>>("open_status"), Some("queued"));
    assert!(!row.get::<_, bool>("enqueued"), "marked for the relay");
}

#[tokio::test]
async fn concurrent_submissions_are_each_stored_once_with_their_own_content_and_enqueued() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;
    app.lift_rate_limit(key.account).await;
    let texts: Vec<String> = (0..30).map(|i| format!("prompt number {i}")).collect();

    let prompts = futures_util::future::join_all(
        texts
            .iter()
            .map(|text| app.submit("prompt", &key, text_form("text", text.clone()))),
    );
    let images = futures_util::future::join_all(
        (0..10).map(|_| app.submit("image", &key, text_form("image", PUBLIC_IMAGE))),
    );
    let (prompts, images) = tokio::join!(prompts, images);

    let mut ids = std::collections::HashSet::new();
    for (text, response) in texts.iter().zip(prompts) {
        assert_eq!(response.status(), 202);
        let body: Value = response.json().await.unwrap();
        let id: uuid::Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
        let row = stored(&app, id).await;
        assert_eq!(row.get::<_, &str>("type"), "text");
        assert_eq!(row.get::<_, &str>("content"), text);
        assert!(row.get::<_, bool>("enqueued"));
        assert!(ids.insert(id));
    }
    for response in images {
        assert_eq!(response.status(), 202);
        let body: Value = response.json().await.unwrap();
        let id: uuid::Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
        assert_eq!(stored(&app, id).await.get::<_, &str>("type"), "image");
        assert!(ids.insert(id));
    }
    assert_eq!(app.stream_len(Modality::Text).await, 30);
    assert_eq!(app.stream_len(Modality::Image).await, 10);
}

#[tokio::test]
async fn a_nul_character_in_a_prompt_or_a_chat_is_400_and_nothing_is_stored() {
    let app = spawn_app().await;
    let key = app.account_with_key(None).await;

    let prompt = app
        .submit("prompt", &key, text_form("text", "before\0after"))
        .await;
    let chat = app
        .submit(
            "chat",
            &key,
            text_form(
                "messages",
                json!([{"role": "user", "content": "before\u{0}after"}]).to_string(),
            ),
        )
        .await;

    assert_error(prompt, 400, "INVALID_REQUEST").await;
    assert_error(chat, 400, "INVALID_REQUEST").await;
    let client = app.db.pool.get().await.unwrap();
    let jobs: i64 = client
        .query_one("SELECT count(*) FROM jobs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(jobs, 0);
    assert_eq!(app.stream_len(Modality::Text).await, 0);
}
