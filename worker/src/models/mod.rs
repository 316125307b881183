//! The built-in models of the `local` provider (contract 10): text, NSFW and speech models read
//! from `APP_MODEL_DIR`, loaded once per worker process and shared by all its jobs. Inference is
//! CPU work: it runs on tokio's blocking threads through [`Inference`], a few at a time, never
//! on the threads that drive the queue and the database.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use moderation_shared::{runtime::StartupError, telemetry};
use tokio::sync::Semaphore;

use crate::ModelSettings;

pub mod language;
pub mod multilingual;
pub mod nsfw;
pub mod onnx;
pub mod set;
pub mod text;
pub mod whisper;

/// Whether this CPU's int8 matrix products are exact: rten-gemm's int8 kernel sums them with
/// dot-product instructions (AVX512-VNNI on x86-64, SDOT on Arm), not with VPMADDUBSW, which
/// adds pairs of products in 16 bits with saturation (x86-64 without VNNI).
pub fn int8_is_exact() -> bool {
    !rten_gemm::GemmExecutor::<u8, i8, i32>::default().may_saturate()
}

/// How a model's matrix products are computed: in f32, or in int8 where this CPU multiplies
/// int8 exactly (MiniLM: which of its two files runs, `text/embed.rs`; Whisper: its linear
/// layers, `whisper/linear.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Products {
    F32,
    Int8,
}

impl Products {
    /// Int8 where this CPU's int8 products are exact ([`int8_is_exact`]), f32 where rten's
    /// int8 kernel may saturate.
    pub fn for_this_cpu() -> Self {
        if int8_is_exact() {
            Self::Int8
        } else {
            Self::F32
        }
    }

    /// `f32` or `int8`.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Int8 => "int8",
        }
    }
}

/// Loads the built-in models at start-up, following `APP_LOCAL_MODELS`: a missing model is an
/// error when they are required, else it is left out and [`Loader::finish`] warns once, naming
/// `scripts/models`. Sets the gauge `classifier_model_loaded{model}` to 1 or 0 per model.
pub struct Loader<'a> {
    settings: &'a ModelSettings,
    missing: Vec<PathBuf>,
    /// The hash of each model loaded, by name.
    loaded: std::collections::BTreeMap<String, String>,
}

impl<'a> Loader<'a> {
    /// A loader reading from `settings.dir`.
    pub fn new(settings: &'a ModelSettings) -> Self {
        Self {
            settings,
            missing: Vec::new(),
            loaded: std::collections::BTreeMap::new(),
        }
    }

    /// The model directory.
    pub fn dir(&self) -> &Path {
        &self.settings.dir
    }

    /// Loads the model `name` with `load` (given the model directory) when every one of its
    /// `files` (relative to that directory) is there. A file that is there but cannot be read
    /// is an error in both modes: a broken model must not pass content silently.
    pub fn load<T>(
        &mut self,
        name: &'static str,
        files: &[&str],
        load: impl FnOnce(&Path) -> anyhow::Result<T>,
    ) -> Result<Option<T>, StartupError> {
        self.load_variant(name, files, None, load)
    }

    /// As [`Self::load`], for a model computed as `variant` says (`int8`: weights quantised at
    /// load) rather than as its files hold it: its hash in the model set names the variant.
    pub fn load_variant<T>(
        &mut self,
        name: &'static str,
        files: &[&str],
        variant: Option<&str>,
        load: impl FnOnce(&Path) -> anyhow::Result<T>,
    ) -> Result<Option<T>, StartupError> {
        let dir = &self.settings.dir;
        if let Some(absent) = files
            .iter()
            .map(|file| dir.join(file))
            .find(|p| !p.is_file())
        {
            metrics::gauge!(telemetry::CLASSIFIER_MODEL_LOADED, "model" => name).set(0.0);
            if self.settings.required {
                return Err(StartupError::Model {
                    model: name,
                    source: anyhow::anyhow!(
                        "{} is missing (APP_LOCAL_MODELS=required): run scripts/models",
                        absent.display()
                    ),
                });
            }
            self.missing.push(absent);
            return Ok(None);
        }
        let model = load(dir).map_err(|source| StartupError::Model {
            model: name,
            source,
        })?;
        let hash = set::hash_files(dir, files).map_err(|source| StartupError::Model {
            model: name,
            source: source.into(),
        })?;
        let hash = match variant {
            Some(variant) => set::variant_hash(&hash, variant),
            None => hash,
        };
        self.loaded.insert(name.to_owned(), hash);
        metrics::gauge!(telemetry::CLASSIFIER_MODEL_LOADED, "model" => name).set(1.0);
        Ok(Some(model))
    }

    /// Warns once when a model was missing; returns the set of models loaded.
    pub fn finish(self) -> Option<set::ModelSet> {
        if !self.missing.is_empty() {
            let missing: Vec<String> = self
                .missing
                .iter()
                .map(|path| path.display().to_string())
                .collect();
            tracing::warn!(
                missing = %missing.join(", "),
                "built-in models not found: content is judged by the lists and hash banks \
                 alone for what they would cover; run scripts/models to install them"
            );
        }
        set::ModelSet::new(self.loaded)
    }
}

/// A bounded pool for model inference: at most `slots` calls run at once (each on a blocking
/// thread); the others wait their turn without holding a thread.
#[derive(Debug, Clone)]
pub struct Inference {
    slots: Arc<Semaphore>,
    /// The inferences it runs at once.
    size: usize,
}

/// Inference could not run: the blocking task panicked or the pool was shut down.
#[derive(Debug, thiserror::Error)]
#[error("model inference did not complete")]
pub struct InferenceFailed;

impl Inference {
    /// A pool running at most `slots` (at least 1) inferences at once.
    pub fn new(slots: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(slots.max(1))),
            size: slots.max(1),
        }
    }

    /// The inferences it runs at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Runs `work` on a blocking thread once a slot is free, and returns its result.
    pub async fn run<T, F>(&self, work: F) -> Result<T, InferenceFailed>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let _slot = self.slots.acquire().await.map_err(|_| InferenceFailed)?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|_| InferenceFailed)
    }
}

/// `count` calls of `run`, each on a thread of its own, released together: a model's runs
/// at once, for tests.
#[cfg(test)]
pub fn at_once<T: Send>(count: usize, run: impl Fn() -> T + Sync) -> Vec<T> {
    let start = std::sync::Barrier::new(count);
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..count)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    run()
                })
            })
            .collect();
        runs.into_iter()
            .map(|run| run.join().expect("a run panicked"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn two_slots_run_two_at_once_and_never_more() {
        let pool = Inference::new(2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        // Each call waits for a partner: with fewer than two slots none would finish.
        let pair = Arc::new(std::sync::Barrier::new(2));
        let calls = (0..8).map(|_| {
            let (running, most, pair) = (running.clone(), most.clone(), pair.clone());
            pool.run(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                pair.wait();
                running.fetch_sub(1, Ordering::SeqCst);
            })
        });
        let done = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            futures_util::future::join_all(calls),
        )
        .await
        .expect("two calls ran at once");
        assert!(done.iter().all(Result::is_ok));
        assert_eq!(most.load(Ordering::SeqCst), 2);
    }
}
