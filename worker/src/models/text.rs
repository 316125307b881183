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
//!
//! Languages (contract 18): the text's language is detected first ([`language`]). English
//! (and text without a detected language) goes the way above; a text in another covered
//! language is embedded by the multilingual encoder ([`multilingual`]), compared with the same
//! prototypes embedded by it, and scored by a head of its own; a text in a language or script
//! the models do not cover is left to the lists (no score).

use std::{path::Path, sync::Arc};

use moderation_shared::{
    batch::{Batcher, Execute},
    runtime::StartupError,
};

use super::{
    language::{self, Route},
    multilingual::{self, Encoder},
    Inference, InferenceFailed, Loader, Products,
};
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

/// The multilingual encoder's similarity at which a custom category is hit, chosen the same way
/// on eval/custom/ (near-topic false alarms 8.3 %, recall 21.7 %: docs/models-text.md). Its
/// similarities run lower than MiniLM's, so they are scaled by `CUSTOM_THRESHOLD / this`
/// before they are reported: the same custom `block_at` then means the same operating point
/// for both models.
pub const MULTILINGUAL_CUSTOM_THRESHOLD: f32 = 0.36;

/// Texts embedded in one run at most; a gathered batch is cut into runs of similar lengths.
const RUN: usize = 32;

/// Jobs' embedding requests gathered into one batch at most (the worker's default text
/// concurrency holds two such batches a core: `settings.rs`).
pub const MAX_BATCH: usize = 64;

/// The loaded text model, shared by every text job of the process.
pub struct TextModel {
    profanity: Arc<Profanity>,
    /// MiniLM and its head: English.
    english: Judge<Embedder>,
    /// The multilingual encoder and its head: the other covered languages (`None` when it is
    /// not installed and not required: those texts then go to the English model, as before).
    multilingual: Option<Judge<Encoder>>,
    threshold: f32,
}

/// An embedding model with the scorer over its embeddings and its custom categories'
/// reference embeddings (by description and keywords).
struct Judge<E: Embed> {
    embeddings: Batcher<EmbedBatch<E>>,
    scorer: Arc<Scorer>,
    custom: moka::sync::Cache<String, Arc<Vec<Embedding>>>,
    /// What a similarity to a custom category is multiplied by (then clamped to [0, 1]).
    custom_scale: f32,
}

/// What the model made of one text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextScores {
    /// The five categories' scores; empty when no model judged the text (a language the
    /// models do not cover).
    pub categories: Vec<(&'static str, f32)>,
    /// Per enabled custom category, the highest similarity of a segment to it (empty when no
    /// model judged the text).
    pub custom: Vec<(String, f32)>,
    /// The detected language, ISO 639-1; `None` when unknown.
    pub language: Option<&'static str>,
}

impl TextModel {
    /// Loads the text models from the model directory through `loader` (`None` when they are
    /// absent and not required), running inference on `inference`. A category scoring
    /// `threshold` or more rejects. Must run on a Tokio runtime (the batchers are tasks).
    pub fn load(
        loader: &mut Loader<'_>,
        inference: Inference,
        threshold: f32,
    ) -> Result<Option<Self>, StartupError> {
        let profanity = loader.load(TOXICITY_MODEL, &["text/profanity.json"], |dir| {
            Profanity::load(&dir.join("text"))
        })?;
        // The model set's hash names the file that runs: int8 and f32 products score apart.
        let products = Products::in_dir(&loader.dir().join("text"));
        let minilm = format!("text/{}", products.file());
        let embedder = loader.load(
            EMBEDDING_MODEL,
            &[minilm.as_str(), "text/tokenizer.json"],
            |dir| load_embedder(&dir.join("text"), products),
        )?;
        let encoder = loader.load(multilingual::MODEL, &multilingual::FILES, load_encoder)?;
        let (Some(profanity), Some(english)) = (profanity, embedder) else {
            return Ok(None);
        };
        Ok(Some(Self::new(
            profanity, english, encoder, inference, threshold,
        )))
    }

    /// Loads the text models from `dir` (the directory `scripts/models` prepared), all
    /// required: for tools such as the evaluation.
    pub fn load_dir(dir: &Path, inference: Inference, threshold: f32) -> anyhow::Result<Self> {
        let text = dir.join("text");
        let profanity = Profanity::load(&text)?;
        let english = load_embedder(&text, Products::in_dir(&text))?;
        let encoder = load_encoder(dir)?;
        Ok(Self::new(
            profanity,
            english,
            Some(encoder),
            inference,
            threshold,
        ))
    }

    fn new(
        profanity: Profanity,
        (embedder, scorer): (Embedder, Scorer),
        multilingual: Option<(Encoder, Scorer)>,
        inference: Inference,
        threshold: f32,
    ) -> Self {
        Self {
            profanity: Arc::new(profanity),
            english: Judge::new(embedder, scorer, inference.clone(), 1.0),
            multilingual: multilingual.map(|(encoder, scorer)| {
                let scale = CUSTOM_THRESHOLD / MULTILINGUAL_CUSTOM_THRESHOLD;
                Judge::new(encoder, scorer, inference, scale)
            }),
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
    /// category of `policy` the highest similarity, by the model of its language (none for a
    /// language the models do not cover), with that language.
    pub async fn scores(
        &self,
        content: TextContent<'_>,
        policy: &Policy,
    ) -> Result<TextScores, InferenceFailed> {
        let detected = language::of_content(content);
        let mut scores = match (detected.route, &self.multilingual) {
            (Route::Uncovered, _) => TextScores {
                categories: Vec::new(),
                custom: Vec::new(),
                language: None,
            },
            (Route::Multilingual, Some(judge)) => judge.scores(content, policy, None).await?,
            _ => {
                let profanity = Some(&*self.profanity);
                self.english.scores(content, policy, profanity).await?
            }
        };
        scores.language = detected.language;
        Ok(scores)
    }

    /// What the English scorer measured of each segment of `content`, with the segment's
    /// profanity score: for tuning the scorer's constants (the evaluation's `--dump`).
    pub async fn measures(
        &self,
        content: TextContent<'_>,
    ) -> Result<Vec<(Vec<(&'static str, score::Measure)>, f32)>, InferenceFailed> {
        let segments = segment::segments(content);
        let profanity: Vec<f32> = segments.iter().map(|s| self.profanity.score(s)).collect();
        let embeddings = self.english.embed(segments).await?;
        Ok(embeddings
            .iter()
            .zip(profanity)
            .map(|(embedding, profane)| (self.english.scorer.measure(&embedding.sentence), profane))
            .collect())
    }
}

impl<E: Embed> Judge<E> {
    fn new(model: E, scorer: Scorer, inference: Inference, custom_scale: f32) -> Self {
        // A batch in flight per core of the pool (and two at least, so that one gathers while
        // the other runs): the process's cores all embed at once.
        let batches = inference.size().max(2);
        let executor = EmbedBatch {
            model: Arc::new(model),
            inference,
        };
        Self {
            embeddings: Batcher::spawn(executor, MAX_BATCH, batches),
            scorer: Arc::new(scorer),
            custom: moka::sync::Cache::new(1_000),
            custom_scale,
        }
    }

    /// The embeddings of `texts`, in the next batch.
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Embedding>, InferenceFailed> {
        self.embeddings.run(texts).await.map_err(|err| {
            tracing::error!(error = %err, "Text embedding failed");
            InferenceFailed
        })
    }

    /// The scores of `content` by this model (with `profanity`'s term in the head, when
    /// given) under `policy`'s custom categories.
    async fn scores(
        &self,
        content: TextContent<'_>,
        policy: &Policy,
        profanity: Option<&Profanity>,
    ) -> Result<TextScores, InferenceFailed> {
        let segments = segment::segments(content);
        let mut categories: Vec<(&'static str, f32)> =
            self.scorer.names().map(|name| (name, 0.0)).collect();
        let mut custom: Vec<(String, f32)> = policy
            .custom
            .iter()
            .map(|category| (category.name.clone(), 0.0))
            .collect();
        if !segments.is_empty() {
            let profane: Vec<f32> = segments
                .iter()
                .map(|s| profanity.map_or(0.0, |p| p.score(s)))
                .collect();
            let embeddings = self.embed(segments).await?;
            for (embedding, &profane) in embeddings.iter().zip(&profane) {
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
                        *best = best.max((similarity * self.custom_scale).clamp(0.0, 1.0));
                    }
                }
            }
        }
        Ok(TextScores {
            categories,
            custom,
            language: None,
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
/// (the `decide` module), with the detected language; the text model itself rejects nothing.
pub fn verdict(scores: &TextScores, policy: &Policy) -> Verdict {
    let mut verdict = local::passed(policy, false);
    for &(name, score) in &scores.categories {
        verdict.scores.insert(name.to_owned(), score);
    }
    for (name, similarity) in &scores.custom {
        verdict.scores.insert(format!("custom.{name}"), *similarity);
    }
    verdict.language = scores.language.map(str::to_owned);
    verdict
}

/// Loads `products`' embedder from `dir`, embeds the prototypes and loads the compiled head.
fn load_embedder(dir: &Path, products: Products) -> anyhow::Result<(Embedder, Scorer)> {
    let embedder = Embedder::load_products(dir, products)?;
    tracing::info!(file = products.file(), "MiniLM loaded");
    let scorer = prototype_scorer(&embedder, head::Head::compiled()?)?;
    Ok((embedder, scorer))
}

/// Loads the multilingual encoder from the model directory `dir`, embeds the prototypes with
/// it and loads its compiled head.
fn load_encoder(dir: &Path) -> anyhow::Result<(Encoder, Scorer)> {
    let encoder = Encoder::load(dir)?;
    let scorer = prototype_scorer(&encoder, head::Head::multilingual(multilingual::DIM)?)?;
    Ok((encoder, scorer))
}

/// A scorer comparing with the prototypes as `model` embeds them, with `head`.
pub fn prototype_scorer(model: &impl Embed, head: head::Head) -> anyhow::Result<Scorer> {
    let mut categories = Vec::new();
    for (name, sentences) in prototypes::CATEGORIES {
        categories.push((name, embed_all(model, sentences)?));
    }
    let benign = embed_all(model, prototypes::BENIGN)?;
    Ok(Scorer::new(categories, benign, head))
}

/// The sentence embeddings of `sentences`.
fn embed_all(model: &impl Embed, sentences: &[&str]) -> anyhow::Result<Vec<Vec<f32>>> {
    let texts: Vec<String> = sentences.iter().map(|s| (*s).to_owned()).collect();
    let mut all = Vec::with_capacity(texts.len());
    for run in texts.chunks(RUN) {
        all.extend(model.embed_run(run)?.into_iter().map(|e| e.sentence));
    }
    Ok(all)
}

/// A text embedding model: MiniLM (English) or the multilingual encoder.
pub trait Embed: Send + Sync + 'static {
    /// The embeddings of `texts`, in order, in one run.
    fn embed_run(&self, texts: &[String]) -> anyhow::Result<Vec<Embedding>>;
}

impl Embed for Embedder {
    fn embed_run(&self, texts: &[String]) -> anyhow::Result<Vec<Embedding>> {
        self.embed(texts)
    }
}

impl Embed for Encoder {
    /// The multilingual encoder has no middle layer: its embedding is the sentence one.
    fn embed_run(&self, texts: &[String]) -> anyhow::Result<Vec<Embedding>> {
        Ok(self
            .embed(texts)?
            .into_iter()
            .map(|sentence| Embedding {
                sentence,
                middle: Vec::new(),
            })
            .collect())
    }
}

/// Runs the gathered embedding requests of several jobs on the inference pool, as runs of
/// texts of similar lengths (a run is padded to its longest text; MiniLM's int8 file embeds
/// the texts of a run one by one, `embed.rs`).
struct EmbedBatch<E> {
    model: Arc<E>,
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

impl<E: Embed> Execute for EmbedBatch<E> {
    type Request = Vec<String>;
    type Response = Vec<Embedding>;
    type Error = EmbedError;

    /// Each run of the batch is an inference of its own: the runs of one batch and of the
    /// batch gathering beside it share the pool's slots, so one big batch keeps every core
    /// busy. (As one inference, a batch of 64 jobs ran on one core while the other slot's
    /// batch was a few jobs long.)
    async fn execute(&self, requests: &[Vec<String>]) -> Result<Vec<Vec<Embedding>>, EmbedError> {
        let texts: Vec<&String> = requests.iter().flatten().collect();
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let runs = runs(&order, |i| texts[i].len()).into_iter().map(|run| {
            let batch: Vec<String> = run.iter().map(|&i| texts[i].clone()).collect();
            let model = self.model.clone();
            async move {
                let embeddings = self
                    .inference
                    .run(move || model.embed_run(&batch))
                    .await??;
                Ok::<_, EmbedError>((run, embeddings))
            }
        });
        let mut result = vec![Embedding::default(); texts.len()];
        for (run, embeddings) in futures_util::future::try_join_all(runs).await? {
            for (&i, embedding) in run.iter().zip(embeddings) {
                result[i] = embedding;
            }
        }
        let mut embeddings = result.into_iter();
        Ok(requests
            .iter()
            .map(|request| embeddings.by_ref().take(request.len()).collect())
            .collect())
    }
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
            language: Some("en"),
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
        assert_eq!(verdict.language.as_deref(), Some("en"));
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

    #[tokio::test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    async fn text_model_scores_other_languages_with_their_language_and_leaves_uncovered_ones_to_the_lists(
    ) {
        let dir = std::env::var_os("TEST_MODEL_DIR").expect("TEST_MODEL_DIR");
        let model =
            TextModel::load_dir(Path::new(&dir), Inference::new(2), DEFAULT_THRESHOLD).unwrap();
        let gambling = Policy {
            custom: vec![CustomCategory {
                name: "gambling".to_owned(),
                description: "Promotion of gambling: casinos, sports betting, poker and slot \
                              machines."
                    .to_owned(),
                keywords: vec!["casino".to_owned(), "betting".to_owned()],
            }],
            ..Policy::default()
        };
        let judge = |text: &'static str| {
            let (model, policy) = (&model, &gambling);
            async move {
                let content = TextContent {
                    text,
                    messages: None,
                };
                model.scores(content, policy).await.unwrap()
            }
        };

        let threats = [
            (
                "es",
                "Sé dónde vives y a qué hora sales del trabajo. Mañana te voy a matar, te lo juro.",
            ),
            (
                "de",
                "Ich warte nach der Arbeit auf dich, dann schlag ich dich tot.",
            ),
            ("ja", "次に会ったら、お前をぶっ殺してやる。"),
        ];
        let ordinary = [
            (
                "fr",
                "Est-ce que tu peux passer chercher le pain en rentrant ?",
            ),
            ("ru", "Давай встретимся в субботу у кинотеатра в шесть."),
        ];
        let promotion = judge(
            "Juega al póker y a las tragaperras en nuestra web de apuestas \
                               deportivas y gana dinero.",
        )
        .await;
        let amharic = judge("ሰላም ነው? ዛሬ ስራ በጣም ብዙ ነበር፣ ነገ እንገናኝ።").await;

        let flagged = |scores: &TextScores| {
            scores
                .categories
                .iter()
                .any(|(_, s)| *s >= DEFAULT_THRESHOLD)
        };
        for (language, text) in threats {
            let scores = judge(text).await;
            assert_eq!(scores.language, Some(language), "{text}");
            let violence = scores.categories.iter().find(|(n, _)| *n == "violence");
            assert!(
                violence.is_some_and(|(_, s)| *s >= DEFAULT_THRESHOLD),
                "{scores:?}"
            );
        }
        for (language, text) in ordinary {
            let scores = judge(text).await;
            assert_eq!(scores.language, Some(language), "{text}");
            assert!(!flagged(&scores), "{scores:?}");
            assert_eq!(scores.categories.len(), 5);
        }
        assert_eq!(promotion.language, Some("es"));
        assert!(promotion.custom[0].1 >= CUSTOM_THRESHOLD, "{promotion:?}");
        assert_eq!(amharic.language, Some("am"));
        assert!(
            amharic.categories.is_empty() && amharic.custom.is_empty(),
            "{amharic:?}"
        );
        assert!(verdict(&amharic, &gambling).scores.is_empty());
    }

    /// An embedding model whose every run waits, up to 5 s, until `pairs` runs have
    /// started, then embeds each text as its length; a run left waiting fails.
    struct Meeting {
        started: std::sync::Mutex<usize>,
        arrived: std::sync::Condvar,
        pairs: usize,
    }

    impl Embed for Meeting {
        fn embed_run(&self, texts: &[String]) -> anyhow::Result<Vec<Embedding>> {
            let mut started = self.started.lock().unwrap();
            *started += 1;
            self.arrived.notify_all();
            let (started, _) = self
                .arrived
                .wait_timeout_while(started, std::time::Duration::from_secs(5), |n| {
                    *n < self.pairs
                })
                .unwrap();
            anyhow::ensure!(*started >= self.pairs, "this run ran alone");
            Ok(texts
                .iter()
                .map(|text| Embedding {
                    sentence: vec![text.len() as f32],
                    middle: Vec::new(),
                })
                .collect())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_runs_of_one_batch_share_the_pool_and_keep_each_request_s_order() {
        let batch = EmbedBatch {
            model: Arc::new(Meeting {
                started: std::sync::Mutex::new(0),
                arrived: std::sync::Condvar::new(),
                pairs: 2,
            }),
            inference: Inference::new(2),
        };
        // Two requests of 32 texts: two runs of similar lengths, which must run at once.
        let request = |base: usize| -> Vec<String> {
            (0..32).map(|i| "x".repeat(base + (i * 7) % 32)).collect()
        };
        let requests = vec![request(100), request(10)];

        let embedded = batch.execute(&requests).await.unwrap();

        for (request, embeddings) in requests.iter().zip(&embedded) {
            let lengths: Vec<f32> = request.iter().map(|t| t.len() as f32).collect();
            let got: Vec<f32> = embeddings.iter().map(|e| e.sentence[0]).collect();
            assert_eq!(got, lengths);
        }
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
