//! Evaluates how the built-in text model judges custom categories by meaning, with the
//! worker's own scorer, to choose and check the custom-category threshold.
//!
//!     cargo run --release -p moderation-worker --example eval_custom -- MODEL_DIR CORPUS_DIR
//!
//! CORPUS_DIR holds `categories.tsv` (`name<TAB>description<TAB>keywords`, keywords
//! comma-separated) and `texts.tsv` (`name<TAB>on|off<TAB>text`); `#` starts a comment line.
//! Every text is judged with all the categories enabled, as an account with all of them would.
//! Prints, at the worker's threshold and a sweep of others: recall (an `on` text hits its own
//! category), false positives on `off` texts (texts near a category's topic but not in it:
//! any category hits) and cross hits (an `on` text hits another category too).

#[path = "common/corpus.rs"]
mod corpus;

use std::path::PathBuf;

use anyhow::{bail, Context};
use corpus::read;
use moderation_worker::{
    classify::{CustomCategory, Policy, TextContent},
    models::{
        text::{TextModel, CUSTOM_THRESHOLD, DEFAULT_THRESHOLD},
        Inference,
    },
};

struct Sample {
    category: usize,
    on: bool,
    text: String,
    similarities: Vec<f32>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(models), Some(corpus)) = (args.next(), args.next()) else {
        bail!("usage: eval_custom MODEL_DIR CORPUS_DIR");
    };
    let corpus = PathBuf::from(corpus);
    let model = TextModel::load_dir(&PathBuf::from(models), Inference::new(2), DEFAULT_THRESHOLD)?;
    let mut policy = Policy::default();
    for line in read(&corpus.join("categories.tsv"))? {
        let mut fields = line.split('\t');
        let (Some(name), Some(description), keywords) =
            (fields.next(), fields.next(), fields.next())
        else {
            bail!("categories.tsv: expected name, description and keywords in {line:?}");
        };
        policy.custom.push(CustomCategory {
            name: name.to_owned(),
            description: description.to_owned(),
            keywords: keywords
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect(),
        });
    }
    let mut samples = Vec::new();
    for line in read(&corpus.join("texts.tsv"))? {
        let mut fields = line.splitn(3, '\t');
        let (Some(name), Some(on), Some(text)) = (fields.next(), fields.next(), fields.next())
        else {
            bail!("texts.tsv: expected name, on|off and text in {line:?}");
        };
        let category = policy
            .custom
            .iter()
            .position(|c| c.name == name)
            .with_context(|| format!("texts.tsv: no category {name}"))?;
        let content = TextContent {
            text,
            messages: None,
        };
        let scores = model.scores(content, &policy).await?;
        samples.push(Sample {
            category,
            on: on == "on",
            text: text.to_owned(),
            similarities: scores.custom.iter().map(|(_, s)| *s).collect(),
        });
    }
    println!(
        "{} categories, {} texts ({} on-topic)",
        policy.custom.len(),
        samples.len(),
        samples.iter().filter(|s| s.on).count()
    );
    report(&policy, &samples, CUSTOM_THRESHOLD, true);
    println!("\nthreshold sweep:");
    for step in 10..=30 {
        report(&policy, &samples, step as f32 * 0.025, false);
    }
    Ok(())
}

fn report(policy: &Policy, samples: &[Sample], threshold: f32, detail: bool) {
    let on: Vec<&Sample> = samples.iter().filter(|s| s.on).collect();
    let off: Vec<&Sample> = samples.iter().filter(|s| !s.on).collect();
    let hits = |s: &Sample| -> Vec<usize> {
        (0..s.similarities.len())
            .filter(|&i| s.similarities[i] >= threshold)
            .collect()
    };
    let caught = on.iter().filter(|s| hits(s).contains(&s.category)).count();
    let false_positives = off.iter().filter(|s| !hits(s).is_empty()).count();
    let cross = on
        .iter()
        .filter(|s| hits(s).iter().any(|&i| i != s.category))
        .count();
    let pct = |n: usize, d: usize| 100.0 * n as f64 / d.max(1) as f64;
    println!(
        "threshold {threshold:.2}: recall {:.1}% ({caught}/{}) | false positives on off-topic \
         {:.1}% ({false_positives}/{}) | on-topic texts hitting another category {:.1}% ({cross}/{})",
        pct(caught, on.len()),
        on.len(),
        pct(false_positives, off.len()),
        off.len(),
        pct(cross, on.len()),
        on.len(),
    );
    if !detail {
        return;
    }
    for (i, category) in policy.custom.iter().enumerate() {
        let mine = |want_on: bool| {
            samples
                .iter()
                .filter(move |s| s.category == i && s.on == want_on)
        };
        let recall = mine(true)
            .filter(|s| s.similarities[i] >= threshold)
            .count();
        let fp = mine(false).filter(|s| !hits(s).is_empty()).count();
        println!(
            "  {:<24} recall {recall}/{}  off-topic hits {fp}/{}",
            category.name,
            mine(true).count(),
            mine(false).count()
        );
    }
    for sample in samples {
        let flagged = hits(sample);
        let own = flagged.contains(&sample.category);
        if sample.on && !own {
            println!(
                "  missed [{}] {:.3}: {}",
                policy.custom[sample.category].name,
                sample.similarities[sample.category],
                sample.text
            );
        } else if !sample.on && !flagged.is_empty() {
            let names: Vec<String> = flagged
                .iter()
                .map(|&i| format!("{} {:.3}", policy.custom[i].name, sample.similarities[i]))
                .collect();
            println!(
                "  false positive [{}] {}: {}",
                policy.custom[sample.category].name,
                names.join(", "),
                sample.text
            );
        }
    }
}
