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
    models::{text::TextModel, Inference, Loader},
    policy::{AccountPolicy, PolicyCache},
    ClassifierSettings, WorkerSettings,
};

/// Which provider decides what the blocklists and hash banks let through.
pub enum Provider {
    /// Built in: the blocklists and hash banks alone decide; no network.
    Local,
    /// An OpenAI-compatible model server.
    OpenAi(Box<OpenAiProvider>),
}

/// The checks a job's steps run (blocklists and keywords, the model's text and visual checks)
/// with what they need: policies, fetcher and provider. Shared by every job of a worker process.
pub struct Checks {
    pool: Pool,
    policies: PolicyCache,
    fetcher: MediaFetcher,
    provider: Provider,
    /// The built-in text model (the `local` provider, when its files are there).
    text_model: Option<TextModel>,
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
        let mut text_model = None;
        let provider = match &settings.classifier {
            ClassifierSettings::Local => {
                let inference = Inference::new(
                    std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
                );
                let mut loader = Loader::new(&settings.models);
                text_model = TextModel::load(&mut loader, inference, settings.text_threshold)?;
                loader.finish();
                Provider::Local
            }
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
            text_model,
        })
    }

    /// The provider's name, for metrics: `local` or `openai`.
    pub fn provider_name(&self) -> &'static str {
        match self.provider {
            Provider::Local => "local",
            Provider::OpenAi(_) => "openai",
        }
    }

    /// The model server, when the provider has one.
    pub fn model(&self) -> Option<&OpenAiProvider> {
        match &self.provider {
            Provider::Local => None,
            Provider::OpenAi(provider) => Some(provider),
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
        let normalised = NormalisedText::new(content.text);
        let listed = local::check_text(&normalised, policy);
        if listed.prohibited {
            return Ok(listed);
        }
        if let Some(text_model) = &self.text_model {
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
