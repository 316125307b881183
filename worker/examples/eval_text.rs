//! Evaluates the built-in text model on a labelled corpus with the worker's own scorer.
//!
//!     cargo run --release -p moderation-worker --example eval_text -- MODEL_DIR CORPUS_DIR \
//!         [--threshold T] [--dump FILE]
//!
//! CORPUS_DIR holds `harmful.tsv` (`category<TAB>text`), `ordinary.tsv` and `innocent.tsv`
//! (a text a line); `#` starts a comment line. Prints, at the threshold (default the worker's)
//! and at a sweep of others, the recall per harmful category (any category at or above the
//! threshold counts; `right` is the share whose highest category is the labelled one) and the
//! false-positive rates on ordinary and innocent-alarming messages. `--dump` writes every
//! segment's measures (for tuning the scorer's constants).

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
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--threshold", Some(t)) => threshold = t.parse().context("--threshold")?,
            ("--dump", Some(file)) => dump = Some(file.into()),
            _ => bail!("unknown argument {flag}"),
        }
    }
    let corpus = PathBuf::from(corpus);
    let model = TextModel::load_dir(&PathBuf::from(models), Inference::new(2), threshold)?;
    let mut texts = Vec::new();
    for line in read(&corpus.join("harmful.tsv"))? {
        let (label, text) = line
            .split_once('\t')
            .with_context(|| format!("harmful.tsv: no tab in {line:?}"))?;
        texts.push((label.to_owned(), text.to_owned()));
    }
    for (file, label) in [("ordinary.tsv", "ordinary"), ("innocent.tsv", "innocent")] {
        for line in read(&corpus.join(file))? {
            texts.push((label.to_owned(), line));
        }
    }
    let policy = Policy::default();
    let started = std::time::Instant::now();
    let mut samples = Vec::new();
    for (label, text) in texts {
        let content = TextContent {
            text: &text,
            messages: None,
        };
        let TextScores { categories, .. } = model.scores(content, &policy).await?;
        samples.push(Sample {
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
    println!("\nthreshold sweep:");
    for step in 6..=18 {
        report(&samples, step as f32 * 0.05, false);
    }
    if let Some(file) = dump {
        write_dump(&model, &samples, &file).await?;
    }
    Ok(())
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
                    "  {} [{}] {name} {score:.3}: {}",
                    if harmful { "missed" } else { "false positive" },
                    sample.label,
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
