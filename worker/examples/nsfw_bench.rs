//! The worker's NSFW model code on image files, for the model comparison and the benchmark
//! (`scripts/bench.d/models-nsfw.sh`):
//!
//!     nsfw_bench MODEL_DIR scores IMAGE...                one JSON list of scores
//!     nsfw_bench MODEL_DIR bench THREADS SECONDS IMAGE... images/s (decode, preprocess, infer)
//!     nsfw_bench MODEL_DIR video VIDEO                    frames sampled and the highest score
//!
//! `bench` runs THREADS threads, each scoring the images in turn, on one loaded model.

use std::{
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context;
use moderation_worker::models::nsfw::{frames, score_encoded, NsfwModel};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, mode, rest @ ..] = args.as_slice() else {
        anyhow::bail!("usage: nsfw_bench MODEL_DIR scores|bench|video ...");
    };
    let model = NsfwModel::load(Path::new(dir))?;
    match (mode.as_str(), rest) {
        ("scores", paths) => {
            let scores = paths
                .iter()
                .map(|path| score_file(&model, path))
                .collect::<anyhow::Result<Vec<f32>>>()?;
            println!("{}", serde_json::to_string(&scores)?);
        }
        ("bench", [threads, seconds, paths @ ..]) if !paths.is_empty() => {
            let threads: usize = threads.parse().context("THREADS")?;
            let seconds: f64 = seconds.parse().context("SECONDS")?;
            let images = paths
                .iter()
                .map(|path| std::fs::read(path).with_context(|| path.clone()))
                .collect::<anyhow::Result<Vec<Vec<u8>>>>()?;
            println!("{:.2}", bench(&model, &images, threads, seconds)?);
        }
        ("video", [path]) => {
            let bytes = std::fs::read(path).with_context(|| path.clone())?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let frames = runtime.block_on(frames::sample(&bytes))?;
            let score = score_encoded(&model, &frames).map_err(|f| anyhow::anyhow!("{f}"))?;
            println!("{} frames, highest score {score}", frames.len());
        }
        _ => anyhow::bail!("usage: nsfw_bench MODEL_DIR scores|bench|video ..."),
    }
    Ok(())
}

fn score_file(model: &NsfwModel, path: &str) -> anyhow::Result<f32> {
    let bytes = std::fs::read(path).with_context(|| path.to_owned())?;
    score_encoded(model, &[bytes]).map_err(|failure| anyhow::anyhow!("{path}: {failure}"))
}

/// Images scored per second by `threads` threads over about `seconds`.
fn bench(
    model: &NsfwModel,
    images: &[Vec<u8>],
    threads: usize,
    seconds: f64,
) -> anyhow::Result<f64> {
    score_encoded(model, &images[..1]).map_err(|f| anyhow::anyhow!("{f}"))?;
    let done = AtomicU64::new(0);
    let until = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                while start.elapsed() < until {
                    for image in images {
                        if score_encoded(model, std::slice::from_ref(image)).is_ok() {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    Ok(done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}
