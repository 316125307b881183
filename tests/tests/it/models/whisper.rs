//! The speech tier (`models::whisper`): the worker's built-in Whisper (base, multilingual, the
//! default; tiny.en where named) on clips spoken by `espeak-ng` and made by `sox` (Debian
//! packages), in the library and through a real worker binary, whose log, job rows and Redis
//! keys must never hold what was said.
//!
//!     TEST_MODEL_DIR=... cargo test -p moderation-tests --test it -- --ignored models::whisper

use std::{path::PathBuf, process::Command, sync::OnceLock, time::Duration};

use moderation_shared::{
    domain::{Modality, Scope},
    redis_conn::RedisConn,
    url_guard::UrlGuard,
};
use moderation_tests::{
    eventually,
    media::MediaServer,
    spawn_app_with,
    worker::{model_dir, WorkerProcess},
    TestApp, TestKey,
};
use moderation_worker::{
    classify::{Policy, TextContent},
    models::{
        int8_is_exact,
        text::{TextModel, DEFAULT_THRESHOLD},
        whisper::{SpeechModel, Whisper},
        Inference, Products,
    },
};
use reqwest::multipart::Form;
use serde_json::Value;
use uuid::Uuid;

const THREAT: &str = "I will kill you. I know where you live.";
const GREETING: &str = "Good morning everyone, welcome to the garden party.";
/// A German threat, for the privacy scan with a language other than English.
const GERMAN_THREAT: &str = "Ich werde dich finden und dich umbringen. Ich weiß, wo du wohnst.";
/// A Spanish threat Whisper base hears as Spanish with a margin (faster-whisper: es 0.86).
const SPANISH_THREAT: &str = "Te voy a matar esta noche. Sé muy bien dónde vives con tu familia.";
/// Words of the sentences that appear nowhere else (no log message, column or key).
const SPOKEN_WORDS: [&str; 7] = [
    "kill",
    "where you live",
    "garden",
    "party",
    "welcome",
    "umbringen",
    "finden",
];

/// The default model (base), loaded once for the library tests.
fn whisper() -> &'static Whisper {
    static MODEL: OnceLock<Whisper> = OnceLock::new();
    MODEL.get_or_init(|| Whisper::load(&model_dir(), SpeechModel::Base).expect("load Whisper"))
}

/// A scratch directory of this test's own.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("whisper-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `text` spoken by espeak-ng, as a WAV file's bytes (22.05 kHz: the worker resamples).
fn speak(text: &str) -> Vec<u8> {
    speak_in("en", text)
}

/// `text` spoken by espeak-ng's `voice`.
fn speak_in(voice: &str, text: &str) -> Vec<u8> {
    let path = scratch().join("speech.wav");
    let status = Command::new("espeak-ng")
        .args(["-v", voice, "-w"])
        .arg(&path)
        .arg(text)
        .status()
        .expect("run espeak-ng (Debian package espeak-ng)");
    assert!(status.success());
    std::fs::read(&path).unwrap()
}

/// A WAV file made by `sox -n <file> <effects>`.
fn sox(rate: &str, effects: &[&str]) -> Vec<u8> {
    let path = scratch().join("sound.wav");
    let status = Command::new("sox")
        // `-R`: sox seeds its noise generator with a fixed number, so every run hears the same
        // noise (Whisper hallucinates words on some pink noise and not on other).
        .args(["-R", "-n", "-r", rate, "-c", "1", "-b", "16"])
        .arg(&path)
        .args(effects)
        .status()
        .expect("run sox (Debian package sox)");
    assert!(status.success());
    std::fs::read(&path).unwrap()
}

/// Eight seconds of pink noise.
fn noise() -> Vec<u8> {
    sox("16000", &["synth", "8", "pinknoise", "vol", "0.5"])
}

/// A plucked tune at 44.1 kHz, four and a half seconds.
fn music() -> Vec<u8> {
    sox(
        "44100",
        &[
            "synth", "0.5", "pluck", "C4", ":", "synth", "0.5", "pluck", "E4", ":", "synth", "0.5",
            "pluck", "G4", ":", "synth", "0.5", "pluck", "C5", ":", "synth", "1", "pluck", "A3",
            ":", "synth", "0.5", "pluck", "E4", ":", "synth", "0.5", "pluck", "C4",
        ],
    )
}

#[test]
#[ignore = "the model tier: needs scripts/models"]
fn whisper_hears_the_words_of_a_spoken_sentence() {
    let transcript = whisper().transcribe(speak(GREETING)).unwrap();

    let text = transcript.text().to_lowercase();
    assert!(
        text.contains("good morning") && text.contains("garden party"),
        "{text}"
    );
}

/// `text`'s words, lower-cased, without punctuation.
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
#[ignore = "the model tier: needs scripts/models"]
fn int8_linear_layers_hear_the_words_and_language_the_f32_ones_do() {
    if !int8_is_exact() {
        // Without exact int8 products (x86-64 without VNNI) the worker keeps f32.
        assert_eq!(Products::for_this_cpu(), Products::F32);
        return;
    }
    assert_eq!(Products::for_this_cpu(), Products::Int8);
    let f32s = Whisper::load_with(&model_dir(), SpeechModel::Base, Products::F32).unwrap();
    // The words that carry each sentence: the two may differ elsewhere (on the German threat
    // f32 hears "Ich möchte", int8 "Ich werde", as spoken).
    let sentences: [(&str, &str, &[&str]); 4] = [
        ("en", GREETING, &["good", "morning", "garden", "party"]),
        ("en", THREAT, &["kill", "where", "live"]),
        ("de", GERMAN_THREAT, &["finden", "umbringen"]),
        ("es", SPANISH_THREAT, &["matar", "noche", "familia"]),
    ];

    for (voice, sentence, keys) in sentences {
        let clip = speak_in(voice, sentence);
        for transcript in [
            whisper().transcribe(clip.clone()).unwrap(),
            f32s.transcribe(clip).unwrap(),
        ] {
            let heard = words(transcript.text());
            for key in keys {
                assert!(heard.iter().any(|word| word == key), "{key} in {heard:?}");
            }
            assert_eq!(transcript.language(), Some(voice), "{sentence}");
        }
    }
}

#[test]
#[ignore = "the model tier: needs scripts/models"]
fn tiny_en_still_transcribes_english_for_deployments_that_choose_it() {
    let tiny = Whisper::load(&model_dir(), SpeechModel::TinyEn).unwrap();

    let transcript = tiny.transcribe(speak(GREETING)).unwrap();

    assert!(
        transcript.text().to_lowercase().contains("garden party"),
        "{}",
        transcript.text()
    );
    assert_eq!(transcript.language(), Some("en"));
}

#[tokio::test]
#[ignore = "the model tier: needs scripts/models"]
async fn spoken_threats_are_rejected_and_greetings_pass_in_english_german_and_spanish() {
    let text = TextModel::load_dir(&model_dir(), Inference::new(2), DEFAULT_THRESHOLD).unwrap();
    // Sentences espeak-ng speaks clearly enough for Whisper base; in other languages its
    // voices are often heard as another language (docs/models-audio.md).
    let clips = [
        ("en", "en", true, THREAT),
        ("en", "en", false, GREETING),
        ("de", "de", true, GERMAN_THREAT),
        (
            "de",
            "de",
            false,
            "Guten Morgen zusammen, willkommen zum Gartenfest.",
        ),
        // Not "Te voy a matar. Sé dónde vives.": Whisper base hears that clip as Japanese
        // or Spanish by a hair (faster-whisper: ja 0.19-0.20 against es 0.17-0.19).
        ("es", "es", true, SPANISH_THREAT),
        (
            "es",
            "es",
            false,
            "Buenos días a todos, bienvenidos a la fiesta del jardín.",
        ),
    ];

    for (voice, language, harmful, sentence) in clips {
        let transcript = whisper().transcribe(speak_in(voice, sentence)).unwrap();
        let content = TextContent {
            text: transcript.text(),
            messages: None,
        };
        let scores = text.scores(content, &Policy::default()).await.unwrap();
        // Under the default policy a category at the default threshold or above rejects.
        let rejected = scores
            .categories
            .iter()
            .any(|(_, score)| *score >= DEFAULT_THRESHOLD);

        assert_eq!(transcript.language(), Some(language), "{sentence}");
        assert_eq!(rejected, harmful, "{sentence}: {scores:?}");
    }
}

#[test]
#[ignore = "the model tier: needs scripts/models"]
fn music_and_noise_give_no_transcript() {
    for (name, clip) in [("noise", noise()), ("music", music())] {
        let transcript = whisper().transcribe(clip).unwrap();

        assert!(transcript.is_empty(), "{name}: {}", transcript.text());
    }
}

#[test]
#[ignore = "the model tier: needs scripts/models"]
fn a_second_window_is_heard_after_30_seconds_of_silence() {
    // espeak-ng writes a 44-byte header and 16-bit mono samples at 22.05 kHz: put 31 s of
    // silence before its samples and fix the lengths.
    let speech = speak(GREETING);
    assert_eq!(&speech[36..40], b"data");
    let mut silence_then_speech = speech[..44].to_vec();
    silence_then_speech.extend(std::iter::repeat_n(0u8, 31 * 22_050 * 2));
    silence_then_speech.extend_from_slice(&speech[44..]);
    let data_len = (silence_then_speech.len() - 44) as u32;
    silence_then_speech[4..8].copy_from_slice(&(data_len + 36).to_le_bytes());
    silence_then_speech[40..44].copy_from_slice(&data_len.to_le_bytes());

    let transcript = whisper().transcribe(silence_then_speech).unwrap();

    assert!(
        transcript.text().to_lowercase().contains("garden party"),
        "{}",
        transcript.text()
    );
}

/// Submits the audio at `url` and waits (the worker is a debug build) for its verdict.
async fn judge(app: &TestApp, key: &TestKey, url: &str) -> (Uuid, Value) {
    let form = Form::new()
        .text("audio", url.to_owned())
        .text("webhook_url", "https://127.0.0.1:9/hook");
    let response = app.submit("audio", key, form).await;
    assert_eq!(response.status(), 202);
    let body: Value = response.json().await.unwrap();
    let job: Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
    let done = eventually(
        Duration::from_secs(300),
        "the audio job to finish",
        || async {
            let body: Value = app
                .get(&format!("/api/v1/job/{job}"), key)
                .await
                .json()
                .await
                .ok()?;
            matches!(body["status"].as_str(), Some("completed" | "failed")).then_some(body)
        },
    )
    .await;
    (job, done)
}

/// Every column of `job`'s row and of its deliveries, as JSON text.
async fn rows_of(app: &TestApp, job: Uuid) -> String {
    let client = app.db.pool.get().await.unwrap();
    let mut text = String::new();
    for query in [
        "SELECT row_to_json(j)::text FROM jobs j WHERE id = $1",
        "SELECT row_to_json(d)::text FROM deliveries d WHERE job_id = $1",
    ] {
        for row in client.query(query, &[&job]).await.unwrap() {
            text.push_str(row.get::<_, &str>(0));
            text.push('\n');
        }
    }
    text
}

/// The names and values of every key of the test's Redis namespace.
async fn redis_dump(app: &TestApp) -> String {
    let conn = RedisConn::new(&app.redis).unwrap();
    let pattern = conn.key("*");
    conn.with(|mut conn| async move {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await?;
        let mut dump = String::new();
        for key in keys {
            let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await?;
            let read = match kind.as_str() {
                "string" => redis::cmd("GET").arg(&key).clone(),
                "hash" => redis::cmd("HGETALL").arg(&key).clone(),
                "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).clone(),
                "set" => redis::cmd("SMEMBERS").arg(&key).clone(),
                "zset" => redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).clone(),
                "stream" => redis::cmd("XRANGE").arg(&key).arg("-").arg("+").clone(),
                other => panic!("key {key} of unexpected type {other}"),
            };
            let value: redis::Value = read.query_async(&mut conn).await?;
            dump.push_str(&key);
            dump.push('\n');
            flatten(&value, &mut dump);
        }
        Ok(dump)
    })
    .await
    .unwrap()
}

/// The strings inside a Redis reply, one a line.
fn flatten(value: &redis::Value, out: &mut String) {
    match value {
        redis::Value::BulkString(bytes) => {
            out.push_str(&String::from_utf8_lossy(bytes));
            out.push('\n');
        }
        redis::Value::SimpleString(text) => {
            out.push_str(text);
            out.push('\n');
        }
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.iter().for_each(|item| flatten(item, out));
        }
        redis::Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            flatten(k, out);
            flatten(v, out);
        }),
        _ => {}
    }
}

#[tokio::test]
#[ignore = "the model tier: needs scripts/models"]
async fn a_spoken_threat_is_rejected_a_greeting_and_music_pass_and_no_spoken_word_is_kept() {
    let app = spawn_app_with(|s| s.url_guard = UrlGuard::system(true)).await;
    let key = app
        .account_with_key(Some(&[Scope::ModerateAudio, Scope::JobRead]))
        .await;
    app.lift_rate_limit(key.account).await;
    let media = MediaServer::start().await;
    let threat = media.add("one.wav", speak(THREAT), "audio/wav");
    let greeting = media.add("two.wav", speak(GREETING), "audio/wav");
    let tune = media.add("three.wav", music(), "audio/wav");
    let german = media.add("four.wav", speak_in("de", GERMAN_THREAT), "audio/wav");
    let dir = model_dir();
    let worker = WorkerProcess::spawn_logged(
        &app,
        &app.redis,
        Modality::Audio,
        &[
            ("APP_ALLOW_PRIVATE_URLS", "true"),
            ("APP_MODEL_DIR", dir.to_str().unwrap()),
            ("APP_LOCAL_MODELS", "required"),
            ("RUST_LOG", "debug"),
        ],
    );

    let (threat_job, threat) = judge(&app, &key, &threat).await;
    let (greeting_job, greeting) = judge(&app, &key, &greeting).await;
    let (tune_job, tune) = judge(&app, &key, &tune).await;
    let (german_job, german) = judge(&app, &key, &german).await;

    for body in [&threat, &german] {
        assert_eq!(
            (body["status"].as_str(), body["is_prohibited"].as_bool()),
            (Some("completed"), Some(true)),
            "{body}"
        );
    }
    assert!(
        threat["reason"].as_str().unwrap().contains("violence"),
        "{threat}"
    );
    for body in [&greeting, &tune] {
        assert_eq!(
            (body["status"].as_str(), body["is_prohibited"].as_bool()),
            (Some("completed"), Some(false)),
            "{body}"
        );
    }
    let mut kept = worker.log();
    assert!(kept.contains("Worker started"), "the log was captured");
    for job in [threat_job, greeting_job, tune_job, german_job] {
        kept.push_str(&rows_of(&app, job).await);
    }
    for body in [&threat, &greeting, &tune, &german] {
        kept.push_str(&body.to_string());
    }
    kept.push_str(&redis_dump(&app).await);
    let kept = kept.to_lowercase();
    for word in SPOKEN_WORDS {
        assert!(!kept.contains(word), "{word:?} was kept somewhere");
    }
}

/// A CTranslate2 `model.bin` (binary version 6) of float32 `tensors`.
fn ct2_file(tensors: &[(&str, &[u32], &[f32])]) -> Vec<u8> {
    fn name(out: &mut Vec<u8>, text: &str) {
        out.extend_from_slice(&(text.len() as u16 + 1).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
        out.push(0);
    }
    let mut out = 6u32.to_le_bytes().to_vec();
    name(&mut out, "WhisperSpec");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u32).to_le_bytes());
    for (key, shape, values) in tensors {
        name(&mut out, key);
        out.push(shape.len() as u8);
        shape
            .iter()
            .for_each(|d| out.extend_from_slice(&d.to_le_bytes()));
        out.push(0);
        out.extend_from_slice(&(values.len() as u32 * 4).to_le_bytes());
        values
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}

#[test]
#[ignore = "the model tier: needs scripts/models"]
fn the_preparing_script_reads_a_ct2_file_and_splits_a_fused_query_key_value() {
    let dir = scratch();
    let fused: Vec<f32> = (0..12).map(|v| v as f32).collect();
    std::fs::write(
        dir.join("model.bin"),
        ct2_file(&[
            ("layer/linear_0/weight", &[6, 2], &fused),
            ("layer/linear_0/bias", &[6], &[1.0, 2.0, 0.0, 0.0, 5.0, 6.0]),
        ]),
    )
    .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/models.d/whisper.py");
    let check = r#"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("whisper_prep", sys.argv[1])
prep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prep)
ct2 = prep.read_ct2(sys.argv[2] + "/model.bin")
split = prep.split_fused("layer", ct2["layer/linear_0/weight"], ct2["layer/linear_0/bias"],
                         ["attn.q_proj", "attn.k_proj", "attn.v_proj"])
print(json.dumps({k: v.tolist() for k, v in sorted(split.items())}))
"#;

    let output = Command::new(model_dir().join(".venv/bin/python"))
        .args(["-c", check])
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap();

    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let split: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        split,
        serde_json::json!({
            "attn.q_proj.weight": [[0.0, 1.0], [2.0, 3.0]],
            "attn.q_proj.bias": [1.0, 2.0],
            "attn.k_proj.weight": [[4.0, 5.0], [6.0, 7.0]],
            "attn.v_proj.weight": [[8.0, 9.0], [10.0, 11.0]],
            "attn.v_proj.bias": [5.0, 6.0],
        })
    );
}
