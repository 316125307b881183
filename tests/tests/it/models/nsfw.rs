//! The NSFW model tier (contract 10): the worker's open_nsfw scores against onnxruntime's, and
//! the model's decisions through the fleet. Needs `scripts/models` (`TEST_MODEL_DIR`), ffmpeg,
//! and for the comparison the reference venv's python (`MODEL_TESTS_PYTHON`).
//!
//! No explicit material is used: the high scores come from synthetic skin-tone images, and the
//! fleet tests set `APP_NSFW_THRESHOLD` low enough for them to cross it.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use moderation_shared::domain::Scope;
use moderation_tests::{
    media::MediaServer,
    spawn_app_with,
    worker::{model_dir, spawn_worker, TestWorker},
    TestApp, TestKey,
};
use moderation_worker::models::nsfw::{score_encoded, NsfwModel};
use reqwest::multipart::Form;
use serde_json::{json, Value};
use uuid::Uuid;

/// The threshold the fleet tests configure: above the safe photos, below the skin tones.
const LOW_THRESHOLD: f32 = 0.1;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/nsfw")
        .join(name)
}

fn png(image: &image::RgbImage) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// A flat square of a light skin tone (open_nsfw scores it about 0.29).
fn skin_square() -> Vec<u8> {
    png(&image::RgbImage::from_pixel(
        256,
        256,
        image::Rgb([230, 180, 160]),
    ))
}

/// A safe photo (scikit-image's `chelsea.png`, a cat, CC0) at 256x256, the skin square's size.
fn safe_square() -> Vec<u8> {
    let photo = image::open(fixture("chelsea.png")).unwrap();
    png(&photo
        .resize_exact(256, 256, image::imageops::FilterType::Triangle)
        .into_rgb8())
}

/// A horizontal gradient, not square, to exercise resizing in both directions.
fn gradient() -> Vec<u8> {
    png(&image::RgbImage::from_fn(397, 181, |x, y| {
        image::Rgb([
            (x % 256) as u8,
            (y * 255 / 180) as u8,
            ((x + y) % 256) as u8,
        ])
    }))
}

fn model() -> NsfwModel {
    NsfwModel::load(&model_dir()).unwrap()
}

fn score(model: &NsfwModel, bytes: Vec<u8>) -> f32 {
    score_encoded(model, &[bytes]).unwrap()
}

fn reference_python() -> PathBuf {
    std::env::var_os("MODEL_TESTS_PYTHON")
        .map(PathBuf::from)
        .expect("MODEL_TESTS_PYTHON: the python of the reference venv (model-tests.txt)")
}

/// onnxruntime's scores of `paths` (nsfw_reference.py beside this file).
fn reference_scores(paths: &[PathBuf]) -> Vec<f32> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/models/nsfw_reference.py");
    let model = model_dir().join("nsfw/open-nsfw.onnx");
    let output = Command::new(reference_python())
        .arg(script)
        .arg("scores")
        .arg(model)
        .args(paths)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
#[ignore = "the models tier: scripts/models, ffmpeg and MODEL_TESTS_PYTHON"]
fn the_workers_scores_match_onnxruntime_within_a_thousandth() {
    let dir = tempdir();
    let generated = [
        ("skin.png", skin_square()),
        ("safe.png", safe_square()),
        ("gradient.png", gradient()),
    ];
    let mut paths: Vec<PathBuf> = ["chelsea.png", "rocket.jpg", "skin_high.png"]
        .iter()
        .map(|name| fixture(name))
        .collect();
    for (name, bytes) in &generated {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        paths.push(path);
    }
    let model = model();

    let ours: Vec<f32> = paths
        .iter()
        .map(|path| score(&model, std::fs::read(path).unwrap()))
        .collect();
    let theirs = reference_scores(&paths);

    for ((path, ours), theirs) in paths.iter().zip(&ours).zip(&theirs) {
        assert!(
            (ours - theirs).abs() < 1e-3,
            "{}: worker {ours}, onnxruntime {theirs}",
            path.display()
        );
    }
    // The inputs span the range: safe photos low, skin tones high.
    assert!(theirs.iter().any(|s| *s < 0.05) && theirs.iter().any(|s| *s > 0.5));
}

#[test]
#[ignore = "the models tier: scripts/models, ffmpeg and MODEL_TESTS_PYTHON"]
fn safe_photos_score_below_and_skin_tones_above_the_test_threshold() {
    let model = model();

    let safe = [
        std::fs::read(fixture("chelsea.png")).unwrap(),
        std::fs::read(fixture("rocket.jpg")).unwrap(),
    ]
    .map(|bytes| score(&model, bytes));
    let skin = [
        skin_square(),
        std::fs::read(fixture("skin_high.png")).unwrap(),
    ]
    .map(|bytes| score(&model, bytes));

    assert!(safe.iter().all(|s| *s < LOW_THRESHOLD), "{safe:?}");
    assert!(skin.iter().all(|s| *s > LOW_THRESHOLD), "{skin:?}");
    // The default threshold lets the flat skin tone through.
    assert!(skin[0] < moderation_shared::policy::DEFAULT_NSFW_BLOCK_AT as f32);
}

struct Fleet {
    app: TestApp,
    key: TestKey,
    media: MediaServer,
    _worker: TestWorker,
}

async fn nsfw_fleet(nsfw_check: bool) -> Fleet {
    let app =
        spawn_app_with(|s| s.url_guard = moderation_shared::url_guard::UrlGuard::system(true))
            .await;
    let key = app
        .account_with_key(Some(&[
            Scope::ModerateImage,
            Scope::ModerateVideo,
            Scope::JobRead,
        ]))
        .await;
    app.lift_rate_limit(key.account).await;
    let client = app.db.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE accounts SET nsfw_check = $2 WHERE id = $1",
            &[&key.account.0, &nsfw_check],
        )
        .await
        .unwrap();
    app.activate_policy(key.account, |policy| {
        policy.categories.insert(
            "nsfw".to_owned(),
            moderation_shared::policy::Rule::enforce(f64::from(LOW_THRESHOLD)),
        );
    })
    .await;
    let worker = spawn_worker(&app, |settings| {
        settings.models.dir = model_dir();
        settings.models.required = true;
    })
    .await;
    Fleet {
        app,
        key,
        media: MediaServer::start().await,
        _worker: worker,
    }
}

impl Fleet {
    async fn run(&self, kind: &str, name: &str, bytes: Vec<u8>, content_type: &str) -> Value {
        let url = self.media.add(name, bytes, content_type);
        let form = Form::new()
            .text(kind.to_owned(), url)
            .text("webhook_url", "https://127.0.0.1:9/hook");
        let response = self.app.submit(kind, &self.key, form).await;
        assert_eq!(response.status(), 202);
        let body: Value = response.json().await.unwrap();
        let job: Uuid = body["job_id"].as_str().unwrap().parse().unwrap();
        self.app.finished_job(&self.key, job).await
    }
}

#[tokio::test]
#[ignore = "the models tier: scripts/models, ffmpeg and MODEL_TESTS_PYTHON"]
async fn an_image_over_the_threshold_is_rejected_and_a_safe_photo_passes() {
    let fleet = nsfw_fleet(true).await;
    let expected = format!("{:.3}", score(&model(), skin_square()));

    let skin = fleet
        .run("image", "skin.png", skin_square(), "image/png")
        .await;
    let safe = fleet
        .run(
            "image",
            "cat.png",
            std::fs::read(fixture("chelsea.png")).unwrap(),
            "image/png",
        )
        .await;

    assert_eq!(skin["status"], "completed", "{skin}");
    assert_eq!(skin["is_prohibited"], true);
    assert_eq!(
        skin["categories"],
        json!({"ai_adult_general": false, "underage": false, "nsfw": true})
    );
    let reason = skin["reason"].as_str().unwrap();
    assert!(
        reason.contains("nsfw") && reason.contains(&expected),
        "{reason}"
    );
    assert_eq!(safe["status"], "completed", "{safe}");
    assert_eq!(safe["is_prohibited"], false);
    assert_eq!(
        safe["categories"],
        json!({"ai_adult_general": false, "underage": false, "nsfw": false})
    );
    assert_eq!(
        format!("{:.3}", skin["scores"]["nsfw"].as_f64().unwrap()),
        expected,
        "the job's score is the model's: {skin}"
    );
    assert!(safe["scores"]["nsfw"].as_f64().unwrap() < 0.1, "{safe}");
}

#[tokio::test]
#[ignore = "the models tier: scripts/models, ffmpeg and MODEL_TESTS_PYTHON"]
async fn with_the_nsfw_check_off_an_image_gets_no_nsfw_category() {
    let fleet = nsfw_fleet(false).await;

    let skin = fleet
        .run("image", "skin.png", skin_square(), "image/png")
        .await;

    assert_eq!(skin["status"], "completed", "{skin}");
    assert_eq!(skin["is_prohibited"], false);
    assert_eq!(
        skin["categories"],
        json!({"ai_adult_general": false, "underage": false})
    );
    assert!(skin.get("scores").is_none(), "no model ran: {skin}");
}

#[tokio::test]
#[ignore = "the models tier: scripts/models, ffmpeg and MODEL_TESTS_PYTHON"]
async fn a_video_takes_the_score_of_its_highest_frame() {
    let fleet = nsfw_fleet(true).await;
    // Ten safe frames, then ten skin-tone ones, stored losslessly: the sampled skin frames
    // are the skin square to the bit.
    let dir = tempdir();
    for i in 0..20 {
        let frame = if i < 10 { safe_square() } else { skin_square() };
        std::fs::write(dir.join(format!("frame{i:03}.png")), frame).unwrap();
    }
    let mixed = ffmpeg(
        &dir,
        &["-framerate", "10", "-i", "frame%03d.png"],
        "png",
        "mixed.mkv",
    );
    let safe = ffmpeg(
        &dir,
        &["-framerate", "10", "-i", "frame%03d.png", "-frames:v", "10"],
        "png",
        "safe.mkv",
    );
    let expected = format!("{:.3}", score(&model(), skin_square()));

    let mixed = fleet
        .run("video", "mixed.mkv", mixed, "video/x-matroska")
        .await;
    let safe = fleet
        .run("video", "safe.mkv", safe, "video/x-matroska")
        .await;

    assert_eq!(mixed["status"], "completed", "{mixed}");
    assert_eq!(mixed["is_prohibited"], true);
    assert_eq!(mixed["categories"]["nsfw"], true);
    let reason = mixed["reason"].as_str().unwrap();
    assert!(reason.contains(&expected), "{reason}");
    assert_eq!(safe["status"], "completed", "{safe}");
    assert_eq!(safe["is_prohibited"], false);
    assert_eq!(safe["categories"]["nsfw"], false);
}

#[tokio::test]
#[ignore = "the models tier: scripts/models, ffmpeg and MODEL_TESTS_PYTHON"]
async fn a_video_without_frames_is_unsupported_media() {
    let fleet = nsfw_fleet(true).await;
    let dir = tempdir();
    let audio_only = ffmpeg(
        &dir,
        &["-f", "lavfi", "-i", "sine=frequency=440:duration=1"],
        "aac",
        "tone.mp4",
    );

    let job = fleet
        .run("video", "tone.mp4", audio_only, "video/mp4")
        .await;

    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["error"]["code"], "MEDIA_UNSUPPORTED");
}

/// Runs ffmpeg in `dir` with `inputs`, encoding with `codec` to `name`, and returns the file.
fn ffmpeg(dir: &Path, inputs: &[&str], codec: &str, name: &str) -> Vec<u8> {
    let status = Command::new("ffmpeg")
        .current_dir(dir)
        .args(["-v", "error", "-y"])
        .args(inputs)
        .args(["-c", codec, name])
        .status()
        .expect("ffmpeg (Debian package ffmpeg)");
    assert!(status.success());
    std::fs::read(dir.join(name)).unwrap()
}

/// A fresh directory under the system's temporary one.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nsfw-test-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
