//! What every job's steps share: the account policies, the media fetcher and the provider.

use std::sync::Arc;

use deadpool_postgres::Object;
use moderation_shared::{
    db::{self, jobs::ClaimedJob, DbError, Pool},
    domain::{FailureCode, JobStage, Modality},
    runtime::StartupError,
};

use crate::{
    classify::{
        local,
        normalise::NormalisedText,
        openai::{OpenAiProvider, VisualKind},
        scrub, TextContent, Verdict,
    },
    failure::Failure,
    fetch::MediaFetcher,
    models::{
        whisper::{self, Transcript, Whisper},
        Inference, Loader,
    },
    policy::{AccountPolicy, PolicyCache},
    ClassifierSettings, WorkerSettings,
};

/// Which provider decides what the blocklists and hash banks let through.
pub enum Provider {
    /// Built in, no network: the blocklists and hash banks, and the built-in models found.
    Local(LocalModels),
    /// An OpenAI-compatible model server.
    OpenAi(Box<OpenAiProvider>),
}

/// The built-in models a `local` worker loaded (contract 10), shared by its jobs.
pub struct LocalModels {
    /// Whisper, for audio transcripts (loaded by audio workers).
    speech: Option<Arc<Whisper>>,
    /// The pool the models' inference runs on.
    inference: Inference,
}

impl LocalModels {
    /// Loads the models the worker's modalities need, following `APP_LOCAL_MODELS`.
    fn load(settings: &WorkerSettings) -> Result<Self, StartupError> {
        let mut loader = Loader::new(&settings.models);
        let speech = if settings.modalities.contains(&Modality::Audio) {
            loader
                .load("whisper", &whisper::FILES, Whisper::load)?
                .map(Arc::new)
        } else {
            None
        };
        loader.finish();
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Self {
            speech,
            inference: Inference::new(cores),
        })
    }
}

/// The checks a job's steps run (blocklists and keywords, the model's text and visual checks)
/// with what they need: policies, fetcher and provider. Shared by every job of a worker process.
pub struct Checks {
    pool: Pool,
    policies: PolicyCache,
    fetcher: MediaFetcher,
    provider: Provider,
}

impl Checks {
    /// The checks `settings` describe, on `pool`.
    pub fn build(settings: &WorkerSettings, pool: Pool) -> Result<Self, StartupError> {
        let fetcher = MediaFetcher::new(
            settings.url_guard.clone(),
            settings.media_timeout,
            settings.extra_ca_pem.as_deref(),
        )
        .map_err(|e| StartupError::HttpClient(e.into()))?;
        let provider = match &settings.classifier {
            ClassifierSettings::Local => Provider::Local(LocalModels::load(settings)?),
            ClassifierSettings::OpenAi(openai) => Provider::OpenAi(Box::new(
                OpenAiProvider::new(openai.as_ref().clone())
                    .map_err(|e| StartupError::HttpClient(e.into()))?,
            )),
        };
        Ok(Self {
            pool,
            policies: PolicyCache::new(),
            fetcher,
            provider,
        })
    }

    /// The provider's name, for metrics: `local` or `openai`.
    pub fn provider_name(&self) -> &'static str {
        match self.provider {
            Provider::Local(_) => "local",
            Provider::OpenAi(_) => "openai",
        }
    }

    /// The model server, when the provider has one.
    pub fn model(&self) -> Option<&OpenAiProvider> {
        match &self.provider {
            Provider::Local(_) => None,
            Provider::OpenAi(provider) => Some(provider),
        }
    }

    /// Whether audio is transcribed: always under `openai`, under `local` when Whisper is
    /// installed.
    pub fn transcribes(&self) -> bool {
        match &self.provider {
            Provider::Local(models) => models.speech.is_some(),
            Provider::OpenAi(_) => true,
        }
    }

    /// The words spoken in `media`: by the built-in Whisper under `local`, by the model
    /// server under `openai`.
    pub async fn transcribe(&self, media: &crate::classify::Media) -> Result<Transcript, Failure> {
        match &self.provider {
            Provider::Local(LocalModels {
                speech: Some(speech),
                inference,
            }) => {
                let (speech, bytes) = (speech.clone(), media.bytes.clone());
                let transcript = inference
                    .run(move || speech.transcribe(bytes))
                    .await
                    .map_err(|_| {
                        Failure::transient(FailureCode::Internal, "Transcribing the audio failed.")
                    })??;
                Ok(transcript)
            }
            Provider::Local(_) => Err(Failure::permanent(
                FailureCode::Internal,
                "No speech model is installed.",
            )),
            Provider::OpenAi(provider) => Ok(Transcript::new(provider.transcribe(media).await?)),
        }
    }

    /// The media fetcher.
    pub fn fetcher(&self) -> &MediaFetcher {
        &self.fetcher
    }

    /// A pooled Postgres connection.
    pub async fn db(&self) -> Result<Object, Failure> {
        Ok(self.pool.get().await.map_err(DbError::from)?)
    }

    /// The policy `job`'s account has at the version the job was claimed with.
    pub async fn policy(&self, job: &ClaimedJob) -> Result<Arc<AccountPolicy>, Failure> {
        Ok(self.policies.load(&self.pool, job).await?)
    }

    /// Records that `job` moved on to `stage`.
    pub async fn set_stage(&self, job: &ClaimedJob, stage: JobStage) -> Result<(), Failure> {
        let client = self.db().await?;
        Ok(db::jobs::set_stage(&client, job.id, stage).await?)
    }

    /// The text check shared by text jobs and audio transcripts: the blocklists and custom
    /// keywords first, then the model (when there is one) for what they let through. The
    /// model's reason is scrubbed of quotations and blocklisted terms.
    pub async fn check_text(
        &self,
        content: TextContent<'_>,
        policy: &AccountPolicy,
    ) -> Result<Verdict, Failure> {
        let normalised = NormalisedText::new(content.text);
        let listed = local::check_text(&normalised, policy);
        let Some(model) = self.model().filter(|_| !listed.prohibited) else {
            return Ok(listed);
        };
        let mut verdict = model.check_text(content, &policy.policy).await?;
        verdict.reason = verdict
            .reason
            .map(|reason| scrub::scrub(&reason, content.text, policy));
        Ok(verdict)
    }

    /// The visual check of an image or video the hash banks let through.
    pub async fn check_visual(
        &self,
        model: &OpenAiProvider,
        modality: Modality,
        media: &crate::classify::Media,
        policy: &AccountPolicy,
    ) -> Result<Verdict, Failure> {
        let kind = VisualKind::try_from(modality).map_err(|_| {
            Failure::permanent(
                FailureCode::Internal,
                "Only images and videos have a visual check.",
            )
        })?;
        let mut verdict = model.check_visual(kind, media, &policy.policy).await?;
        verdict.reason = verdict
            .reason
            .map(|reason| scrub::scrub(&reason, "", policy));
        Ok(verdict)
    }
}
