//! What every job's steps share: the account policies, the media fetcher, the provider and the
//! built-in models.

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
        language,
        nsfw::{self, NsfwModel},
        set::ModelSet,
        text::TextModel,
        whisper::{Transcript, Whisper},
        Inference, Loader, Products,
    },
    policy::{AccountPolicy, PolicyCache},
    ClassifierSettings, WorkerSettings,
};

/// Which provider decides what the blocklists and hash banks let through.
pub enum Provider {
    /// Built in, no network: the blocklists and hash banks, then the built-in models found.
    Local(LocalModels),
    /// An OpenAI-compatible model server.
    OpenAi(Box<OpenAiProvider>),
}

/// The built-in models a `local` worker loaded (contract 10), shared by its jobs.
pub struct LocalModels {
    /// Whisper, for audio transcripts (loaded by audio workers).
    speech: Option<Arc<Whisper>>,
    /// The NSFW model, for images and videos (loaded by image and video workers).
    nsfw: Option<NsfwModel>,
    /// The text models, for prompts, chats and transcripts (loaded by text and audio workers).
    text: Option<TextModel>,
    /// The pool the models' inference runs on.
    inference: Inference,
}

impl LocalModels {
    /// Loads the models the worker's modalities need, following `APP_LOCAL_MODELS`; with the
    /// set of models loaded.
    fn load(settings: &WorkerSettings) -> Result<(Self, Option<ModelSet>), StartupError> {
        let mut loader = Loader::new(&settings.models);
        let takes = |modality| settings.modalities.contains(&modality);
        let speech = if takes(Modality::Audio) {
            let model = settings.models.speech;
            let files = model.files();
            let files: Vec<&str> = files.iter().map(String::as_str).collect();
            // Whisper's linear layers run in int8 where this CPU multiplies int8 exactly; the
            // model set's hash says which.
            let products = Products::for_this_cpu();
            let variant = (products == Products::Int8).then_some("int8");
            loader
                .load_variant("whisper", &files, variant, |dir| {
                    Whisper::load_with(dir, model, products)
                })?
                .map(Arc::new)
        } else {
            None
        };
        let nsfw = if takes(Modality::Image) || takes(Modality::Video) {
            loader.load("nsfw", &[nsfw::MODEL_FILE], NsfwModel::load)?
        } else {
            None
        };
        let inference = Inference::new(settings.threads);
        let text = if takes(Modality::Text) || takes(Modality::Audio) {
            TextModel::load(
                &mut loader,
                inference.clone(),
                settings.policy_defaults.text_block_at as f32,
            )?
        } else {
            None
        };
        let set = loader.finish();
        let models = Self {
            speech,
            nsfw,
            text,
            inference,
        };
        Ok((models, set))
    }
}

/// The checks a job's steps run (blocklists and keywords, the model's text and visual checks)
/// with what they need: policies, fetcher and provider. Shared by every job of a worker process.
pub struct Checks {
    pool: Pool,
    policies: PolicyCache,
    fetcher: MediaFetcher,
    provider: Provider,
    /// The models the provider loaded (`model_sets.id`), when it loaded any.
    model_set: Option<ModelSet>,
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
        let (provider, model_set) = match &settings.classifier {
            ClassifierSettings::Local => {
                let (models, set) = LocalModels::load(settings)?;
                (Provider::Local(models), set)
            }
            ClassifierSettings::OpenAi(openai) => (
                Provider::OpenAi(Box::new(
                    OpenAiProvider::new(openai.as_ref().clone())
                        .map_err(|e| StartupError::HttpClient(e.into()))?,
                )),
                None,
            ),
        };
        Ok(Self {
            pool,
            policies: PolicyCache::new(settings.policy_defaults),
            fetcher,
            provider,
            model_set,
        })
    }

    /// The provider's name, for metrics: `local` or `openai`.
    pub fn provider_name(&self) -> &'static str {
        match self.provider {
            Provider::Local(_) => "local",
            Provider::OpenAi(_) => "openai",
        }
    }

    /// The built-in models this worker loaded, if any.
    pub fn model_set(&self) -> Option<&ModelSet> {
        self.model_set.as_ref()
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
                ..
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
    /// keywords first, then the model (the model server, or the built-in text model under
    /// `local` when it is loaded) for what they let through. The model server's reason is
    /// scrubbed of quotations and blocklisted terms.
    pub async fn check_text(
        &self,
        content: TextContent<'_>,
        policy: &AccountPolicy,
    ) -> Result<Verdict, Failure> {
        let mut verdict = self.judge_text(content, policy).await?;
        // The job reports its language whatever judged it (a list, the models, a provider).
        if verdict.language.is_none() {
            verdict.language = language::of_content(content).language.map(str::to_owned);
        }
        Ok(verdict)
    }

    /// [`Self::check_text`]'s verdict, before its language is filled in.
    async fn judge_text(
        &self,
        content: TextContent<'_>,
        policy: &AccountPolicy,
    ) -> Result<Verdict, Failure> {
        let normalised = NormalisedText::new(content.text);
        let listed = local::check_text(&normalised, policy);
        if listed.prohibited {
            return Ok(listed);
        }
        if let Provider::Local(LocalModels {
            text: Some(text_model),
            ..
        }) = &self.provider
        {
            return text_model
                .check(content, &policy.policy)
                .await
                .map_err(|_| {
                    Failure::transient(
                        FailureCode::ClassifierUnavailable,
                        "The built-in text model did not complete.",
                    )
                });
        }
        let Some(model) = self.model() else {
            return Ok(listed);
        };
        let mut verdict = model.check_text(content, &policy.policy).await?;
        verdict.reason = verdict
            .reason
            .map(|reason| scrub::scrub(&reason, content.text, policy));
        Ok(verdict)
    }

    /// The NSFW model's check of an image or video the hash banks let through (`banked`, their
    /// verdict), when the account's NSFW check is on and the model is installed: the score sets
    /// `scores.nsfw`, which the account's policy version decides on. A video's score is the
    /// highest of its sampled frames.
    pub async fn check_nsfw(
        &self,
        job: &ClaimedJob,
        modality: Modality,
        media: &crate::classify::Media,
        policy: &AccountPolicy,
        banked: Verdict,
    ) -> Result<Verdict, Failure> {
        let Provider::Local(LocalModels {
            nsfw: Some(model),
            inference,
            ..
        }) = &self.provider
        else {
            return Ok(banked);
        };
        if !policy.policy.nsfw_check {
            return Ok(banked);
        }
        let model = model.clone();
        self.set_stage(job, JobStage::Classifying).await?;
        let images = match modality {
            Modality::Video => nsfw::frames::sample(&media.bytes)
                .await
                .map_err(frames_failure)?
                .into_iter()
                .map(bytes::Bytes::from)
                .collect(),
            _ => vec![media.bytes.clone()],
        };
        let score = inference
            .run(move || nsfw::score_encoded(&model, &images))
            .await
            .map_err(|_| Failure::transient(FailureCode::Internal, "The NSFW model failed."))??;
        Ok(nsfw::verdict(banked, score))
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

/// The failure of a video whose frames could not be sampled.
fn frames_failure(err: nsfw::frames::FramesError) -> Failure {
    use nsfw::frames::FramesError;
    match err {
        FramesError::NoFrames(_) => {
            tracing::info!(error = %err, "No frames sampled from a video");
            Failure::permanent(
                FailureCode::MediaUnsupported,
                "The video has no frames that could be decoded.",
            )
        }
        FramesError::TooLarge | FramesError::Timeout(_) => {
            tracing::info!(error = %err, "Sampling a video's frames was cut short");
            Failure::permanent(
                FailureCode::MediaUnsupported,
                "The video's frames could not be sampled within the limits.",
            )
        }
        FramesError::Io(_) => {
            tracing::warn!(error = %err, "Sampling a video's frames failed");
            Failure::transient(FailureCode::Internal, "Sampling the video's frames failed.")
        }
    }
}
