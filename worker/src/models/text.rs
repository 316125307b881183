//! The built-in text model of the `local` provider (contract 10): scores `harassment`, `hate`,
//! `violence`, `self_harm` and `sexual` in [0, 1] and judges custom categories by meaning.
//!
//! A text is cut into segments (each chat message alone and with the message before it as
//! context; long texts at sentence ends), every segment is embedded by MiniLM and compared with
//! prototype sentences per category ([`score`]); a trained linear head ([`head`]) scores each
//! category from the embedding (two layers pooled), those margins and alt-profanity-check's
//! score. A category's score is its highest over the segments. Embeddings of concurrent jobs
//! are gathered into one inference by a [`Batcher`], which runs on the [`Inference`] pool,
//! never on the async threads. Everything is loaded once per process.

use std::{path::Path, sync::Arc};

use moderation_shared::{
    batch::{Batcher, Execute},
    runtime::StartupError,
};

use super::{Inference, InferenceFailed, Loader};
use crate::classify::{local, Policy, TextContent, Verdict};

pub mod embed;
pub mod head;
pub mod profanity;
pub mod prototypes;
pub mod score;
pub mod segment;

use embed::{Embedder, Embedding};
use profanity::Profanity;
use score::Scorer;

/// The gauge's name for the profanity model.
pub const TOXICITY_MODEL: &str = "text_toxicity";
/// The gauge's name for the embedding model.
pub const EMBEDDING_MODEL: &str = "text_embedding";

/// The default of `APP_TEXT_THRESHOLD`: a category scoring this or more rejects (chosen from
/// the evaluation in docs/models-text.md).
pub const DEFAULT_THRESHOLD: f32 = moderation_shared::policy::DEFAULT_TEXT_BLOCK_AT as f32;

/// The similarity of a text to a custom category's description (or keywords) at which the
/// category is hit, chosen on eval/custom/ to keep false alarms on near-topic texts under
/// 10 % (8.9 %, recall 16 %: docs/models-text.md).
pub const CUSTOM_THRESHOLD: f32 = moderation_shared::policy::DEFAULT_CUSTOM_BLOCK_AT as f32;

/// Texts embedded in one run at most; a gathered batch is cut into runs of similar lengths.
const RUN: usize = 32;

/// Jobs' embedding requests gathered into one batch at most.
const MAX_BATCH: usize = 64;

/// The loaded text model, shared by every text job of the process.
pub struct TextModel {
    profanity: Arc<Profanity>,
    embeddings: Batcher<EmbedBatch>,
    scorer: Arc<Scorer>,
    /// Custom categories' reference embeddings, by description and keywords.
    custom: moka::sync::Cache<String, Arc<Vec<Embedding>>>,
    threshold: f32,
}

/// What the model made of one text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextScores {
    /// The five categories' scores.
    pub categories: Vec<(&'static str, f32)>,
    /// Per enabled custom category, the highest similarity of a segment to it.
    pub custom: Vec<(String, f32)>,
}

impl TextModel {
    /// Loads the text models from the model directory through `loader` (`None` when they are
    /// absent and not required), running inference on `inference`. A category scoring
    /// `threshold` or more rejects. Must run on a Tokio runtime (the batcher is a task).
    pub fn load(
        loader: &mut Loader<'_>,
        inference: Inference,
        threshold: f32,
    ) -> Result<Option<Self>, StartupError> {
        let profanity = loader.load(TOXICITY_MODEL, &["text/profanity.json"], |dir| {
            Profanity::load(&dir.join("text"))
        })?;
        let embedder = loader.load(
            EMBEDDING_MODEL,
            &["text/model.onnx", "text/tokenizer.json"],
            |dir| load_embedder(&dir.join("text")),
        )?;
        let (Some(profanity), Some((embedder, scorer))) = (profanity, embedder) else {
            return Ok(None);
        };
        Ok(Some(Self::new(
            profanity, embedder, scorer, inference, threshold,
        )))
    }

    /// Loads the text models from `dir` (the directory `scripts/models` prepared), all
    /// required: for tools such as the evaluation.
    pub fn load_dir(dir: &Path, inference: Inference, threshold: f32) -> anyhow::Result<Self> {
        let text = dir.join("text");
        let profanity = Profanity::load(&text)?;
        let (embedder, scorer) = load_embedder(&text)?;
        Ok(Self::new(profanity, embedder, scorer, inference, threshold))
    }

    fn new(
        profanity: Profanity,
        embedder: Embedder,
        scorer: Scorer,
        inference: Inference,
        threshold: f32,
    ) -> Self {
        let executor = EmbedBatch {
            embedder: Arc::new(embedder),
            inference,
        };
        Self {
            profanity: Arc::new(profanity),
            embeddings: Batcher::spawn(executor, MAX_BATCH, 2),
            scorer: Arc::new(scorer),
            custom: moka::sync::Cache::new(1_000),
            threshold,
        }
    }

    /// The profanity model (its reference sentences check the export).
    pub fn profanity(&self) -> &Profanity {
        &self.profanity
    }

    /// The threshold at which a category rejects.
    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// Scores `content` for the five categories and `policy`'s custom categories: every
    /// score is in `Verdict.scores`, for the account's policy version to decide on.
    pub async fn check(
        &self,
        content: TextContent<'_>,
        policy: &Policy,
    ) -> Result<Verdict, InferenceFailed> {
        let scores = self.scores(content, policy).await?;
        Ok(verdict(&scores, policy))
    }

    /// The scores of `content`: per category the highest over its segments, and per custom
    /// category of `policy` the highest similarity.
    pub async fn scores(
        &self,
        content: TextContent<'_>,
        policy: &Policy,
    ) -> Result<TextScores, InferenceFailed> {
        let segments = segment::segments(content);
        let mut categories: Vec<(&'static str, f32)> =
            self.scorer.names().map(|name| (name, 0.0)).collect();
        let mut custom: Vec<(String, f32)> = policy
            .custom
            .iter()
            .map(|category| (category.name.clone(), 0.0))
            .collect();
        if segments.is_empty() {
            return Ok(TextScores { categories, custom });
        }
        let profanity: Vec<f32> = segments.iter().map(|s| self.profanity.score(s)).collect();
        let embeddings = self.embed(segments).await?;
        for (embedding, &profane) in embeddings.iter().zip(&profanity) {
            for ((_, best), (_, score)) in categories
                .iter_mut()
                .zip(self.scorer.score(embedding, profane))
            {
                *best = best.max(score);
            }
        }
        for (category, (_, best)) in policy.custom.iter().zip(custom.iter_mut()) {
            let references = self.custom_references(category).await?;
            for embedding in &embeddings {
                for reference in references.iter() {
                    let similarity = score::cosine(&embedding.sentence, &reference.sentence);
                    *best = best.max(similarity.clamp(0.0, 1.0));
                }
            }
        }
        Ok(TextScores { categories, custom })
    }

    /// What the scorer measured of each segment of `content`, with the segment's profanity
    /// score: for tuning the scorer's constants (the evaluation's `--dump`).
    pub async fn measures(
        &self,
        content: TextContent<'_>,
    ) -> Result<Vec<(Vec<(&'static str, score::Measure)>, f32)>, InferenceFailed> {
        let segments = segment::segments(content);
        let profanity: Vec<f32> = segments.iter().map(|s| self.profanity.score(s)).collect();
        let embeddings = self.embed(segments).await?;
        Ok(embeddings
            .iter()
            .zip(profanity)
            .map(|(embedding, profane)| (self.scorer.measure(&embedding.sentence), profane))
            .collect())
    }

    /// The embeddings of `texts`, in the next batch.
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Embedding>, InferenceFailed> {
        self.embeddings.run(texts).await.map_err(|err| {
            tracing::error!(error = %err, "Text embedding failed");
            InferenceFailed
        })
    }

    /// What a custom category is compared with: its description, and its keywords together.
    async fn custom_references(
        &self,
        category: &crate::classify::CustomCategory,
    ) -> Result<Arc<Vec<Embedding>>, InferenceFailed> {
        let mut texts = vec![category.description.clone()];
        if !category.keywords.is_empty() {
            texts.push(category.keywords.join(", "));
        }
        let key = texts.join("\n");
        if let Some(found) = self.custom.get(&key) {
            return Ok(found);
        }
        let embedded = Arc::new(self.embed(texts).await?);
        self.custom.insert(key, embedded.clone());
        Ok(embedded)
    }
}

/// The verdict of `scores`: every category's score and every custom category's similarity
/// (as `custom.<name>`) recorded for the account's policy version to decide on
/// (the `decide` module); the text model itself rejects nothing.
pub fn verdict(scores: &TextScores, policy: &Policy) -> Verdict {
    let mut verdict = local::passed(policy, false);
    for &(name, score) in &scores.categories {
        verdict.scores.insert(name.to_owned(), score);
    }
    for (name, similarity) in &scores.custom {
        verdict.scores.insert(format!("custom.{name}"), *similarity);
    }
    verdict
}

/// Loads the embedder, embeds the prototypes and loads the compiled head.
fn load_embedder(dir: &Path) -> anyhow::Result<(Embedder, Scorer)> {
    let embedder = Embedder::load(dir)?;
    let mut categories = Vec::new();
    for (name, sentences) in prototypes::CATEGORIES {
        categories.push((name, embed_all(&embedder, sentences)?));
    }
    let benign = embed_all(&embedder, prototypes::BENIGN)?;
    let head = head::Head::compiled()?;
    Ok((embedder, Scorer::new(categories, benign, head)))
}

/// The sentence embeddings of `sentences`.
fn embed_all(embedder: &Embedder, sentences: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
    let texts: Vec<String> = sentences.iter().map(|s| (*s).to_owned()).collect();
    let mut all = Vec::with_capacity(texts.len());
    for run in texts.chunks(RUN) {
        all.extend(embedder.embed(run)?.into_iter().map(|e| e.sentence));
    }
    Ok(all)
}

/// Runs the gathered embedding requests of several jobs on the inference pool, as runs of
/// texts of similar lengths (a run is padded to its longest text).
struct EmbedBatch {
    embedder: Arc<Embedder>,
    inference: Inference,
}

/// Embedding failed.
#[derive(Debug, thiserror::Error)]
enum EmbedError {
    #[error(transparent)]
    Inference(#[from] InferenceFailed),
    #[error("the embedding model failed: {0:#}")]
    Model(#[from] anyhow::Error),
}

impl Execute for EmbedBatch {
    type Request = Vec<String>;
    type Response = Vec<Embedding>;
    type Error = EmbedError;

    async fn execute(&self, requests: &[Vec<String>]) -> Result<Vec<Vec<Embedding>>, EmbedError> {
        let texts: Vec<String> = requests.iter().flatten().cloned().collect();
        let embedder = self.embedder.clone();
        let mut embeddings = self
            .inference
            .run(move || embed_runs(&embedder, texts))
            .await??
            .into_iter();
        Ok(requests
            .iter()
            .map(|request| embeddings.by_ref().take(request.len()).collect())
            .collect())
    }
}

/// The embeddings of `texts` in order, computed in runs of texts of similar lengths.
fn embed_runs(embedder: &Embedder, texts: Vec<String>) -> anyhow::Result<Vec<Embedding>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| texts[i].len());
    let mut result: Vec<Embedding> = vec![Embedding::default(); texts.len()];
    for run in runs(&order, |i| texts[i].len()) {
        let batch: Vec<String> = run.iter().map(|&i| texts[i].clone()).collect();
        for (&i, embedding) in run.iter().zip(embedder.embed(&batch)?) {
            result[i] = embedding;
        }
    }
    Ok(result)
}

/// Cuts `order` (sorted by `len`) into runs of at most [`RUN`] whose longest member is at most
/// twice (plus a little) as long as its shortest, so padding wastes little.
fn runs(order: &[usize], len: impl Fn(usize) -> usize) -> Vec<&[usize]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for end in 1..=order.len() {
        let full = end - start == RUN;
        let last = end == order.len();
        let too_long = !last && len(order[end]) > 2 * len(order[start]) + 16;
        if full || last || too_long {
            runs.push(&order[start..end]);
            start = end;
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::CustomCategory;

    fn policy() -> Policy {
        Policy {
            custom: vec![CustomCategory {
                name: "competitors".to_owned(),
                description: "Mentions of rival products".to_owned(),
                keywords: Vec::new(),
            }],
            ..Policy::default()
        }
    }

    fn scores(violence: f32, competitors: f32) -> TextScores {
        TextScores {
            categories: vec![("harassment", 0.1), ("violence", violence)],
            custom: vec![("competitors".to_owned(), competitors)],
        }
    }

    #[test]
    fn every_score_and_similarity_is_recorded_and_nothing_is_decided() {
        let verdict = verdict(&scores(0.9, 0.8), &policy());
        assert!(!verdict.prohibited);
        assert_eq!(verdict.reason, None);
        assert_eq!(verdict.scores["violence"], 0.9);
        assert_eq!(verdict.scores["harassment"], 0.1);
        assert_eq!(verdict.scores["custom.competitors"], 0.8);
        assert!(!verdict.custom["competitors"]);
    }

    #[tokio::test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    async fn text_model_scores_every_category_and_a_veiled_threat_above_the_default() {
        let dir = std::env::var_os("TEST_MODEL_DIR").expect("TEST_MODEL_DIR");
        let model =
            TextModel::load_dir(Path::new(&dir), Inference::new(2), DEFAULT_THRESHOLD).unwrap();
        let threat = TextContent {
            text: "Lovely car. Shame if someone cut the brakes before your drive home tonight.",
            messages: None,
        };
        let ordinary = TextContent {
            text: "Did you manage to buy the train tickets for Saturday?",
            messages: None,
        };

        let rejected = model.check(threat, &policy()).await.unwrap();
        let passed = model.check(ordinary, &policy()).await.unwrap();

        assert!(
            rejected.scores["violence"] >= DEFAULT_THRESHOLD,
            "{rejected:?}"
        );
        assert!(
            passed.scores.values().all(|&s| s < DEFAULT_THRESHOLD),
            "{passed:?}"
        );
        for verdict in [&rejected, &passed] {
            let mut keys: Vec<&str> = verdict.scores.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(
                keys,
                [
                    "custom.competitors",
                    "harassment",
                    "hate",
                    "self_harm",
                    "sexual",
                    "violence"
                ]
            );
            assert!(verdict.scores.values().all(|s| (0.0..=1.0).contains(s)));
        }
    }

    #[tokio::test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    async fn text_model_head_scores_a_blunt_threat_high_and_an_idiom_low() {
        let dir = std::env::var_os("TEST_MODEL_DIR").expect("TEST_MODEL_DIR");
        let model =
            TextModel::load_dir(Path::new(&dir), Inference::new(2), DEFAULT_THRESHOLD).unwrap();
        let score = |text: &'static str| {
            let model = &model;
            async move {
                let content = TextContent {
                    text,
                    messages: None,
                };
                let scores = model.scores(content, &Policy::default()).await.unwrap();
                scores.categories
            }
        };

        let threat = score("I am going to stab you when you leave work tonight.").await;
        let idiom = score("I could murder a pizza right now.").await;

        assert_eq!(threat[2].0, "violence");
        assert!(threat[2].1 > 0.8, "{threat:?}");
        assert!(idiom.iter().all(|(_, s)| *s < 0.3), "{idiom:?}");
    }

    #[test]
    fn runs_group_texts_of_similar_length_and_keep_every_index_once() {
        let lens = [1usize, 2, 3, 40, 41, 200];
        let order: Vec<usize> = (0..lens.len()).collect();
        let cut = runs(&order, |i| lens[i]);
        assert_eq!(cut, vec![&[0, 1, 2][..], &[3, 4][..], &[5][..]]);
        let many: Vec<usize> = (0..70).collect();
        let cut = runs(&many, |_| 10);
        assert_eq!(cut.iter().map(|r| r.len()).collect::<Vec<_>>(), [32, 32, 6]);
        assert!(runs(&[], |_| 0).is_empty());
    }
}
