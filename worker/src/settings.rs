//! The worker's settings, read from the environment.

use std::{collections::BTreeMap, net::SocketAddr, path::PathBuf, time::Duration};

use moderation_shared::{
    config::{
        env_bool, env_millis, env_raw, extra_ca_pem_from_env, metrics_addr, ConfigError,
        DatabaseSettings, RedisSettings,
    },
    domain::Modality,
    lifecycle::Retention,
    policy::PolicyDefaults,
    queue::QueueSettings,
    url_guard::UrlGuard,
};

use crate::{
    classify::openai::OpenAiSettings,
    models::{text, whisper::SpeechModel},
};

/// Concurrency per modality when `APP_WORKER_CONCURRENCY` does not name it, on up to two
/// cores; [`default_concurrency`] scales it to more.
pub const DEFAULT_CONCURRENCY: usize = 8;

/// The most `APP_WORKER_THREADS` takes.
pub const MAX_THREADS: usize = 1024;

/// Concurrency per modality when `APP_WORKER_CONCURRENCY` does not name it, for a process
/// allowed `threads` cores: [`DEFAULT_CONCURRENCY`], or four jobs per core where that is more,
/// so that while some jobs wait on Postgres, Redis or a download, the others keep every core
/// of the inference pool busy.
pub fn default_concurrency(threads: usize) -> usize {
    DEFAULT_CONCURRENCY.max(4 * threads)
}

/// Text jobs in progress at once per core (two cores at least) when `APP_WORKER_CONCURRENCY`
/// does not name text and the built-in classifier judges it: two of the text model's batches
/// ([`text::MAX_BATCH`] jobs each) a core, so that one cohort of jobs is embedded while the
/// other is claimed, written and fetched. With 64 on two cores the inference threads waited
/// half the time for the next cohort; one worker completed 290-303 jobs/s with 64, 323 with
/// 128, 316-344 with 256 and 345 with 512, both cores then busy (docs/models.md). A text job in
/// progress holds a few kilobytes.
pub const TEXT_CONCURRENCY_PER_CORE: usize = 2 * text::MAX_BATCH;

/// The most jobs of one modality in progress at once in one process.
pub const MAX_CONCURRENCY: usize = 1000;

/// Text concurrency when `APP_WORKER_CONCURRENCY` does not name text and the built-in
/// classifier judges it ([`TEXT_CONCURRENCY_PER_CORE`]), for a process allowed `threads`
/// cores.
pub fn default_text_concurrency(threads: usize) -> usize {
    (TEXT_CONCURRENCY_PER_CORE * threads.max(2)).min(MAX_CONCURRENCY)
}

/// The cores this process may use: its CPU affinity (`taskset`) and cgroup quota
/// (`cpu.max`), as the standard library reads them; 1 when they cannot be read.
fn allowed_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Parses `APP_WORKER_THREADS`: the cores the process sizes its pools to, 1 to
/// [`MAX_THREADS`]; `allowed` when unset.
fn parse_threads(raw: Option<&str>, allowed: usize) -> Result<usize, ConfigError> {
    let Some(raw) = raw else {
        return Ok(allowed);
    };
    match raw.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_THREADS).contains(&n) => Ok(n),
        _ => Err(ConfigError::new(
            "APP_WORKER_THREADS",
            format!("expected a whole number from 1 to {MAX_THREADS}, got {raw:?}"),
        )),
    }
}

/// `APP_CLASSIFIER`: which provider decides what the blocklists and hash banks let through.
#[derive(Debug, Clone)]
pub enum ClassifierSettings {
    /// `local` (the default): built in, no network.
    Local,
    /// `openai`: an OpenAI-compatible model server.
    OpenAi(Box<OpenAiSettings>),
}

impl ClassifierSettings {
    /// Reads `APP_CLASSIFIER` and, for `openai`, the `APP_OPENAI_*` variables and the models
    /// that jobs of `modalities` need.
    pub fn from_env(modalities: &[Modality]) -> Result<Self, ConfigError> {
        match env_raw("APP_CLASSIFIER")?.as_deref().map(str::trim) {
            None | Some("local") => Ok(Self::Local),
            Some("openai") => {
                let settings = OpenAiSettings::from_env()?;
                settings.require_models(modalities)?;
                Ok(Self::OpenAi(Box::new(settings)))
            }
            Some(other) => Err(ConfigError::new(
                "APP_CLASSIFIER",
                format!("expected local or openai, got {other:?}"),
            )),
        }
    }
}

/// The worker's settings.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// Postgres.
    pub database: DatabaseSettings,
    /// Redis.
    pub redis: RedisSettings,
    /// The modalities this process works on (`--modality`).
    pub modalities: Vec<Modality>,
    /// `APP_HOST` and `METRICS_PORT`: where `/metrics` is served (default `0.0.0.0:9091`;
    /// port 0 picks a free one).
    pub metrics_addr: SocketAddr,
    /// `APP_WORKER_THREADS`: the cores the process sizes its pools to (the async runtime, the
    /// model inference pool and the text model's batches at once); by default the cores its
    /// CPU affinity and cgroup quota allow.
    pub threads: usize,
    /// `APP_WORKER_CONCURRENCY`: jobs in progress at once, per modality.
    pub concurrency: Concurrency,
    /// Queue and relay timing (`APP_QUEUE_*`, `APP_RELAY_*`).
    pub queue: QueueSettings,
    /// How long a stopping worker waits for jobs in progress before it exits anyway (25 s);
    /// entries it still holds then are taken over by other workers after the min-idle time.
    pub shutdown_timeout: Duration,
    /// Checks media URLs and every address fetched from; `APP_ALLOW_PRIVATE_URLS=true`
    /// (development and tests only) lets them reach loopback and private addresses.
    pub url_guard: UrlGuard,
    /// `APP_EXTRA_CA_FILE`: PEM roots trusted besides the system's for media TLS.
    pub extra_ca_pem: Option<Vec<u8>>,
    /// `APP_MEDIA_TIMEOUT_MS`: the deadline of one media download, redirects included
    /// (default 120 000).
    pub media_timeout: Duration,
    /// `APP_CLASSIFIER` and the provider's settings.
    pub classifier: ClassifierSettings,
    /// Where the built-in models are and whether they must be there.
    pub models: ModelSettings,
    /// `APP_TEXT_THRESHOLD` and `APP_NSFW_THRESHOLD`: the service defaults a new account's
    /// policy version 1 holds; here they decide only for an account without versions.
    pub policy_defaults: PolicyDefaults,
    /// `APP_RETENTION_DAYS` and `APP_CONTENT_RETENTION_DAYS`: what the lifecycle keeps (one
    /// worker process at a time runs it, every [`LIFECYCLE_INTERVAL`]).
    pub retention: Retention,
}

/// How often the lifecycle runs (partitions ahead, expired ones dropped, old content erased).
pub const LIFECYCLE_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// `APP_MODEL_DIR` and `APP_LOCAL_MODELS` (contract 10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// The directory `scripts/models` prepared (default
    /// `${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models`).
    pub dir: PathBuf,
    /// `required`: a missing model is a start-up error; `auto` (the default): the models found
    /// are used, and a warning names `scripts/models` when one is missing.
    pub required: bool,
    /// `APP_SPEECH_MODEL`: `base` (the default, 99 languages) or `tiny.en` (English only,
    /// faster).
    pub speech: SpeechModel,
}

impl ModelSettings {
    /// Reads `APP_MODEL_DIR` and `APP_LOCAL_MODELS`.
    pub fn from_env() -> Result<Self, ConfigError> {
        let dir = match env_raw("APP_MODEL_DIR")? {
            Some(dir) => PathBuf::from(dir),
            None => default_model_dir(),
        };
        let required = match env_raw("APP_LOCAL_MODELS")?.as_deref().map(str::trim) {
            None | Some("auto") => false,
            Some("required") => true,
            Some(other) => {
                return Err(ConfigError::new(
                    "APP_LOCAL_MODELS",
                    format!("expected auto or required, got {other:?}"),
                ))
            }
        };
        let speech = match env_raw("APP_SPEECH_MODEL")? {
            Some(raw) => parse_speech_model(&raw)
                .map_err(|reason| ConfigError::new("APP_SPEECH_MODEL", reason))?,
            None => SpeechModel::default(),
        };
        Ok(Self {
            dir,
            required,
            speech,
        })
    }
}

/// The speech model `raw` names (`base` or `tiny.en`).
fn parse_speech_model(raw: &str) -> Result<SpeechModel, String> {
    SpeechModel::parse(raw.trim())
        .ok_or_else(|| format!("expected base or tiny.en, got {:?}", raw.trim()))
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/moderation/models`, where `scripts/models` puts them.
fn default_model_dir() -> PathBuf {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("moderation").join("models")
}

impl WorkerSettings {
    /// Reads the environment; `modalities` come from the command line.
    pub fn from_env(modalities: Vec<Modality>) -> Result<Self, ConfigError> {
        let threads = parse_threads(env_raw("APP_WORKER_THREADS")?.as_deref(), allowed_cores())?;
        let classifier = ClassifierSettings::from_env(&modalities)?;
        let defaults = Concurrency::defaults(threads, &classifier);
        let concurrency = match env_raw("APP_WORKER_CONCURRENCY")? {
            Some(raw) => Concurrency::parse(&raw, defaults)
                .map_err(|reason| ConfigError::new("APP_WORKER_CONCURRENCY", reason))?,
            None => defaults,
        };
        Ok(Self {
            database: DatabaseSettings::from_env()?,
            redis: RedisSettings::from_env()?,
            modalities,
            metrics_addr: metrics_addr(9091)?,
            threads,
            concurrency,
            queue: QueueSettings::from_env()?,
            shutdown_timeout: Duration::from_secs(25),
            url_guard: UrlGuard::system(env_bool("APP_ALLOW_PRIVATE_URLS", false)?),
            extra_ca_pem: extra_ca_pem_from_env()?,
            media_timeout: env_millis("APP_MEDIA_TIMEOUT_MS", Duration::from_secs(120), 1..)?,
            classifier,
            models: ModelSettings::from_env()?,
            policy_defaults: PolicyDefaults::from_env()?,
            retention: Retention::from_env()?,
        })
    }

    /// Settings for tests and local runs: every modality, defaults elsewhere, metrics on a
    /// free loopback port, media allowed from private addresses.
    pub fn for_local(database: DatabaseSettings, redis: RedisSettings) -> Self {
        Self {
            database,
            redis,
            modalities: Modality::ALL.to_vec(),
            metrics_addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads: allowed_cores(),
            concurrency: Concurrency::default(),
            queue: QueueSettings::default(),
            shutdown_timeout: Duration::from_secs(25),
            url_guard: UrlGuard::system(true),
            extra_ca_pem: None,
            media_timeout: Duration::from_secs(120),
            classifier: ClassifierSettings::Local,
            models: ModelSettings {
                dir: default_model_dir(),
                required: false,
                speech: SpeechModel::default(),
            },
            policy_defaults: PolicyDefaults::default(),
            retention: Retention::default(),
        }
    }
}

/// Jobs in progress at once per modality: `8` for every modality, or `text=8,image=2` per
/// modality (unnamed ones keep their defaults, [`Concurrency::defaults`]), or both:
/// `4,text=16`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency {
    default: usize,
    per_modality: BTreeMap<Modality, usize>,
}

impl Default for Concurrency {
    fn default() -> Self {
        Self::all(DEFAULT_CONCURRENCY)
    }
}

impl Concurrency {
    /// `n` for every modality.
    pub fn all(n: usize) -> Self {
        Self {
            default: n,
            per_modality: BTreeMap::new(),
        }
    }

    /// The concurrency of `modality`.
    pub fn of(&self, modality: Modality) -> usize {
        self.per_modality
            .get(&modality)
            .copied()
            .unwrap_or(self.default)
    }

    /// The defaults for a process allowed `threads` cores: [`default_concurrency`] for every
    /// modality, and [`default_text_concurrency`] for text when `classifier` is the built-in
    /// one.
    pub fn defaults(threads: usize, classifier: &ClassifierSettings) -> Self {
        let mut defaults = Self::all(default_concurrency(threads));
        if matches!(classifier, ClassifierSettings::Local) {
            defaults
                .per_modality
                .insert(Modality::Text, default_text_concurrency(threads));
        }
        defaults
    }

    /// Parses the `APP_WORKER_CONCURRENCY` syntax: a bare number replaces every default, a
    /// named modality's number its own; modalities it does not name keep `defaults`.
    pub fn parse(raw: &str, defaults: Self) -> Result<Self, String> {
        let mut every = None;
        let mut named = BTreeMap::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (modality, number) = match part.split_once('=') {
                Some((m, n)) => (
                    Some(m.trim().parse::<Modality>().map_err(|e| e.to_string())?),
                    n,
                ),
                None => (None, part),
            };
            let n: usize = number
                .trim()
                .parse()
                .map_err(|_| format!("expected a number, got {number:?}"))?;
            if !(1..=MAX_CONCURRENCY).contains(&n) {
                return Err(format!(
                    "concurrency must be 1 to {MAX_CONCURRENCY}, got {n}"
                ));
            }
            match modality {
                Some(m) => {
                    named.insert(m, n);
                }
                None => every = Some(n),
            }
        }
        let mut parsed = every.map_or(defaults, Self::all);
        parsed.per_modality.extend(named);
        Ok(parsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_parses_one_number_for_every_modality() {
        let c = Concurrency::parse("12", Concurrency::default()).unwrap();
        assert!(Modality::ALL.iter().all(|&m| c.of(m) == 12));
    }

    #[test]
    fn concurrency_parses_per_modality_values_and_defaults_the_rest() {
        let c = Concurrency::parse("text=8, image=2", Concurrency::default()).unwrap();
        assert_eq!(c.of(Modality::Text), 8);
        assert_eq!(c.of(Modality::Image), 2);
        assert_eq!(c.of(Modality::Audio), DEFAULT_CONCURRENCY);
    }

    #[test]
    fn threads_default_to_the_allowed_cores_and_take_one_to_the_limit() {
        assert_eq!(parse_threads(None, 3).unwrap(), 3);
        assert_eq!(parse_threads(Some("1"), 3).unwrap(), 1);
        assert_eq!(parse_threads(Some(" 1024 "), 3).unwrap(), MAX_THREADS);
        for bad in ["0", "1025", "-1", "two", "1.5"] {
            let err = parse_threads(Some(bad), 3).unwrap_err().to_string();
            assert!(err.contains("APP_WORKER_THREADS"), "{err}");
        }
    }

    #[test]
    fn the_default_concurrency_grows_with_the_cores() {
        assert_eq!(default_concurrency(1), DEFAULT_CONCURRENCY);
        assert_eq!(default_concurrency(2), DEFAULT_CONCURRENCY);
        assert_eq!(default_concurrency(16), 64);
        let c = Concurrency::parse("text=2", Concurrency::all(default_concurrency(16))).unwrap();
        assert_eq!((c.of(Modality::Text), c.of(Modality::Image)), (2, 64));
    }

    #[test]
    fn the_built_in_classifier_holds_two_text_batches_a_core() {
        let local = |threads| Concurrency::defaults(threads, &ClassifierSettings::Local);
        for (threads, text, media) in [(1, 256, 8), (2, 256, 8), (3, 384, 12), (16, 1000, 64)] {
            let c = local(threads);
            assert_eq!(c.of(Modality::Text), text, "{threads} cores");
            assert_eq!(c.of(Modality::Image), media, "{threads} cores");
            assert_eq!(c.of(Modality::Audio), media, "{threads} cores");
        }
        // Named modalities keep the others' defaults; a bare number replaces every default.
        let c = Concurrency::parse("image=2", local(2)).unwrap();
        assert_eq!((c.of(Modality::Text), c.of(Modality::Image)), (256, 2));
        let c = Concurrency::parse("4", local(2)).unwrap();
        assert!(Modality::ALL.iter().all(|&m| c.of(m) == 4));
        let c = Concurrency::parse("text=16,4", local(2)).unwrap();
        assert_eq!((c.of(Modality::Text), c.of(Modality::Video)), (16, 4));
    }

    #[test]
    fn a_remote_classifier_keeps_the_common_text_default() {
        let remote = ClassifierSettings::OpenAi(Box::new(
            OpenAiSettings::new("http://127.0.0.1:8000").unwrap(),
        ));
        let c = Concurrency::defaults(2, &remote);
        assert_eq!(c.of(Modality::Text), DEFAULT_CONCURRENCY);
    }

    #[test]
    fn speech_model_is_base_or_tiny_en() {
        assert_eq!(parse_speech_model("base"), Ok(SpeechModel::Base));
        assert_eq!(parse_speech_model(" tiny.en "), Ok(SpeechModel::TinyEn));
        assert!(parse_speech_model("large")
            .unwrap_err()
            .contains("base or tiny.en"));
    }

    #[test]
    fn concurrency_accepts_the_limits_and_rejects_beyond_them() {
        assert_eq!(
            Concurrency::parse("1", Concurrency::default())
                .unwrap()
                .of(Modality::Text),
            1
        );
        assert_eq!(
            Concurrency::parse("1000", Concurrency::default())
                .unwrap()
                .of(Modality::Text),
            1000
        );
        assert!(Concurrency::parse("0", Concurrency::default()).is_err());
        assert!(Concurrency::parse("1001", Concurrency::default()).is_err());
        assert!(Concurrency::parse("chat=2", Concurrency::default()).is_err());
        assert!(Concurrency::parse("text=many", Concurrency::default()).is_err());
    }
}
