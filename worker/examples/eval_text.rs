//! Evaluates the built-in text model on a labelled corpus with the worker's own scorer.
//!
//!     cargo run --release -p moderation-worker --example eval_text -- MODEL_DIR CORPUS_DIR \
//!         [--threshold T] [--dump FILE] [--languages]
//!
//! CORPUS_DIR holds `harmful.tsv` (`category<TAB>text`), `ordinary.tsv` and `innocent.tsv`
//! (a text a line); `#` starts a comment line. With `--languages` every line starts with the
//! text's language (ISO 639-1) and a tab, and the figures are printed per language too, with
//! how often the detected language was the labelled one. Prints, at the threshold (default the
//! worker's) and at a sweep of others, the recall per harmful category (any category at or
//! above the threshold counts; `right` is the share whose highest category is the labelled
//! one) and the false-positive rates on ordinary and innocent-alarming messages, then per
//! category the recall and precision at a sweep of `block_at` values. `--dump`
//! writes every segment's measures (for tuning the scorer's constants).

#[path = "common/corpus.rs"]
mod corpus;

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context};
use corpus::read;
use moderation_worker::{
    classify::{Policy, TextContent},
    models::{
        text::{TextModel, TextScores, DEFAULT_THRESHOLD},
        Inference,
    },
};

struct Sample {
    /// The labelled language (`--languages`), else empty.
    language: String,
    /// The language the model detected.
    detected: Option<&'static str>,
    label: String,
    text: String,
    scores: Vec<(&'static str, f32)>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(models), Some(corpus)) = (args.next(), args.next()) else {
        bail!("usage: eval_text MODEL_DIR CORPUS_DIR [--threshold T] [--dump FILE]");
    };
    let mut threshold = DEFAULT_THRESHOLD;
    let mut dump: Option<PathBuf> = None;
    let mut languages = false;
    while let Some(flag) = args.next() {
        if flag == "--languages" {
            languages = true;
            continue;
        }
        match (flag.as_str(), args.next()) {
            ("--threshold", Some(t)) => threshold = t.parse().context("--threshold")?,
            ("--dump", Some(file)) => dump = Some(file.into()),
            _ => bail!("unknown argument {flag}"),
        }
    }
    // The language column, when the corpus has one.
    let split_language = |line: String| -> anyhow::Result<(String, String)> {
        if !languages {
            return Ok((String::new(), line));
        }
        let (language, rest) = line
            .split_once('\t')
            .with_context(|| format!("no language in {line:?}"))?;
        Ok((language.to_owned(), rest.to_owned()))
    };
    let corpus = PathBuf::from(corpus);
    let model = TextModel::load_dir(&PathBuf::from(models), Inference::new(2), threshold)?;
    let mut texts = Vec::new();
    for line in read(&corpus.join("harmful.tsv"))? {
        let (language, line) = split_language(line)?;
        let (label, text) = line
            .split_once('\t')
            .with_context(|| format!("harmful.tsv: no tab in {line:?}"))?;
        texts.push((language, label.to_owned(), text.to_owned()));
    }
    for (file, label) in [("ordinary.tsv", "ordinary"), ("innocent.tsv", "innocent")] {
        for line in read(&corpus.join(file))? {
            let (language, text) = split_language(line)?;
            texts.push((language, label.to_owned(), text));
        }
    }
    let policy = Policy::default();
    let started = std::time::Instant::now();
    let mut samples = Vec::new();
    for (language, label, text) in texts {
        let content = TextContent {
            text: &text,
            messages: None,
        };
        let TextScores {
            categories,
            language: detected,
            ..
        } = model.scores(content, &policy).await?;
        samples.push(Sample {
            language,
            detected,
            label,
            text,
            scores: categories,
        });
    }
    let elapsed = started.elapsed();
    println!(
        "{} texts scored in {:.2} s ({:.1} ms a text, one at a time)",
        samples.len(),
        elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / samples.len() as f64
    );
    report(&samples, threshold, true);
    if languages {
        by_language(&samples, threshold);
    }
    println!("\nthreshold sweep:");
    for step in 6..=18 {
        report(&samples, step as f32 * 0.05, false);
    }
    per_category(&samples);
    if let Some(file) = dump {
        write_dump(&model, &samples, &file).await?;
    }
    Ok(())
}

/// Per labelled language: recall, false positives and how often the detected language was
/// the labelled one.
fn by_language(samples: &[Sample], threshold: f32) {
    let mut languages: Vec<&str> = samples.iter().map(|s| s.language.as_str()).collect();
    languages.sort_unstable();
    languages.dedup();
    println!("\nper language at {threshold:.2}:");
    println!("  language | recall | FP ordinary | FP innocent | language detected");
    for language in languages {
        let of: Vec<&Sample> = samples.iter().filter(|s| s.language == language).collect();
        let share = |label: fn(&str) -> bool| {
            let chosen: Vec<&&Sample> = of.iter().filter(|s| label(&s.label)).collect();
            let hit = chosen.iter().filter(|s| flagged(s, threshold)).count();
            format!("{hit}/{}", chosen.len())
        };
        let detected = of.iter().filter(|s| s.detected == Some(language)).count();
        println!(
            "  {language} | {} | {} | {} | {detected}/{}",
            share(|l| !matches!(l, "ordinary" | "innocent")),
            share(|l| l == "ordinary"),
            share(|l| l == "innocent"),
            of.len()
        );
    }
}

/// Per category, at a sweep of `block_at` values (what a policy version sets, contract 13):
/// recall (the category's labelled texts scoring at or above it in that category) and
/// precision (of the texts scoring at or above it in that category, the share labelled with
/// it, and the share harmful of any category: a rejection for the wrong harm is still a right
/// rejection). Precision depends on the corpus's mix of harmful and benign texts.
fn per_category(samples: &[Sample]) {
    let mut categories: Vec<&str> = samples
        .iter()
        .flat_map(|s| s.scores.iter().map(|(name, _)| *name))
        .collect();
    categories.sort_unstable();
    categories.dedup();
    println!("\nper category (recall | precision, same category | precision, any harm):");
    for category in categories {
        let mut line = format!("  {category}:");
        for step in [7, 9, 11, 13, 15] {
            let threshold = step as f32 * 0.05;
            let hits: Vec<&Sample> = samples
                .iter()
                .filter(|s| {
                    s.scores
                        .iter()
                        .any(|(name, score)| *name == category && *score >= threshold)
                })
                .collect();
            let labelled = samples.iter().filter(|s| s.label == category).count();
            let right = hits.iter().filter(|s| s.label == category).count();
            let harmful = hits
                .iter()
                .filter(|s| !matches!(s.label.as_str(), "ordinary" | "innocent"))
                .count();
            let pct = |n: usize, d: usize| 100.0 * n as f64 / d.max(1) as f64;
            line += &format!(
                " | {threshold:.2}: {:.0}% {:.0}% {:.0}% ({}/{labelled}, {} hit)",
                pct(right, labelled),
                pct(right, hits.len()),
                pct(harmful, hits.len()),
                right,
                hits.len()
            );
        }
        println!("{line}");
    }
}

fn flagged(sample: &Sample, threshold: f32) -> bool {
    sample.scores.iter().any(|(_, s)| *s >= threshold)
}

fn top(sample: &Sample) -> &'static str {
    sample
        .scores
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or("", |(name, _)| name)
}

fn report(samples: &[Sample], threshold: f32, detail: bool) {
    let mut by_label: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for sample in samples {
        let entry = by_label.entry(sample.label.as_str()).or_default();
        entry.0 += 1;
        if flagged(sample, threshold) {
            entry.1 += 1;
            if top(sample) == sample.label {
                entry.2 += 1;
            }
        }
    }
    let pct = |n: usize, d: usize| 100.0 * n as f64 / d.max(1) as f64;
    let (mut harmful, mut caught) = (0, 0);
    let mut line = format!("threshold {threshold:.2}:");
    for (label, (n, hit, right)) in &by_label {
        if matches!(*label, "ordinary" | "innocent") {
            continue;
        }
        harmful += n;
        caught += hit;
        line += &format!(
            " {label} {:.0}% (right {:.0}%)",
            pct(*hit, *n),
            pct(*right, *hit)
        );
    }
    let fp = |label: &str| {
        let (n, hit, _) = by_label.get(label).copied().unwrap_or_default();
        (pct(hit, n), hit, n)
    };
    let (ord, ord_hit, ord_n) = fp("ordinary");
    let (inn, inn_hit, inn_n) = fp("innocent");
    println!(
        "{line} | recall {:.1}% ({caught}/{harmful}) | false positives: ordinary {ord:.1}% \
         ({ord_hit}/{ord_n}), innocent-alarming {inn:.1}% ({inn_hit}/{inn_n})",
        pct(caught, harmful)
    );
    if detail {
        for sample in samples {
            let harmful = !matches!(sample.label.as_str(), "ordinary" | "innocent");
            if harmful != flagged(sample, threshold) {
                let (name, score) = sample
                    .scores
                    .iter()
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .copied()
                    .unwrap_or(("", 0.0));
                println!(
                    "  {} [{}{}] {name} {score:.3}: {}",
                    if harmful { "missed" } else { "false positive" },
                    sample.label,
                    if sample.language.is_empty() {
                        String::new()
                    } else {
                        format!(" {}", sample.language)
                    },
                    sample.text
                );
            }
        }
    }
}

async fn write_dump(model: &TextModel, samples: &[Sample], file: &Path) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(file)?);
    writeln!(out, "index\tlabel\tcategory\tsimilarity\tbenign\tprofanity")?;
    for (i, sample) in samples.iter().enumerate() {
        let content = TextContent {
            text: &sample.text,
            messages: None,
        };
        for (measures, profanity) in model.measures(content).await? {
            for (name, m) in measures {
                writeln!(
                    out,
                    "{i}\t{}\t{name}\t{}\t{}\t{profanity}",
                    sample.label, m.category, m.benign
                )?;
            }
        }
    }
    Ok(())
}
