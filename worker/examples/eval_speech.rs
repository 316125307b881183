//! Evaluates speech end to end with the worker's own models: each clip is transcribed by the
//! built-in Whisper (`APP_SPEECH_MODEL`, default base; `WHISPER_PRODUCTS`: `common/speech.rs`)
//! and its transcript scored by the text model; a clip is rejected when a category scores the
//! default policy's `block_at` (the default threshold) or more, as an audio job's transcript
//! is under the default policy (the lists aside).
//!
//!     cargo run --release -p moderation-worker --example eval_speech -- MODEL_DIR MANIFEST
//!
//! MANIFEST lines: `language<TAB>threat|harmless<TAB>WAV<TAB>reference text`
//! (`scripts/eval.d/audio.sh` speaks `eval/audio/sentences.tsv` with espeak-ng into one).
//! Prints per language: how often Whisper detected the language, the word error rate (words
//! lower-cased without punctuation; characters for Chinese, Japanese and Thai), threats
//! rejected and harmless clips passed; then the totals. A development tool: the worker itself
//! never prints a transcript.

#[path = "common/corpus.rs"]
mod corpus;
#[path = "common/speech.rs"]
mod speech;

use std::{collections::BTreeMap, path::PathBuf};

use anyhow::bail;
use corpus::read;
use moderation_worker::{
    classify::{Policy, TextContent},
    models::{
        text::{TextModel, DEFAULT_THRESHOLD},
        Inference,
    },
};

/// Per language: clips, language detected, word errors, reference words, threats, threats
/// rejected, harmless clips, harmless passed.
#[derive(Default)]
struct Tally {
    clips: usize,
    detected: usize,
    errors: usize,
    words: usize,
    threats: usize,
    rejected: usize,
    harmless: usize,
    passed: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(models), Some(manifest)) = (args.next(), args.next()) else {
        bail!("usage: eval_speech MODEL_DIR MANIFEST");
    };
    let dir = PathBuf::from(models);
    let (whisper, speech) = speech::load(&dir)?;
    let model = TextModel::load_dir(&dir, Inference::new(2), DEFAULT_THRESHOLD)?;
    let policy = Policy::default();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for line in read(&PathBuf::from(manifest))? {
        let fields: Vec<&str> = line.splitn(4, '\t').collect();
        let [language, kind, wav, reference] = fields[..] else {
            bail!("a manifest line is not language, kind, file, text: {line:?}");
        };
        let transcript = whisper.transcribe(std::fs::read(wav)?)?;
        let content = TextContent {
            text: transcript.text(),
            messages: None,
        };
        let scores = model.scores(content, &policy).await?;
        let rejected = scores
            .categories
            .iter()
            .any(|(_, score)| *score >= DEFAULT_THRESHOLD);
        let tally = tallies.entry(language.to_owned()).or_default();
        tally.clips += 1;
        tally.detected += usize::from(transcript.language() == Some(language));
        let (reference, heard) = (
            units(reference, language),
            units(transcript.text(), language),
        );
        tally.errors += distance(&reference, &heard);
        tally.words += reference.len();
        match kind {
            "threat" => {
                tally.threats += 1;
                tally.rejected += usize::from(rejected);
            }
            "harmless" => {
                tally.harmless += 1;
                tally.passed += usize::from(!rejected);
            }
            other => bail!("unknown kind {other:?}"),
        }
        let outcome = if rejected { "rejected" } else { "passed" };
        println!(
            "  {language} {kind} -> {} {outcome}: {}",
            transcript.language().unwrap_or("-"),
            transcript.text()
        );
    }
    println!(
        "\nspeech ({speech}) per language: language detected | WER | threats rejected | harmless passed"
    );
    let mut total = Tally::default();
    for (language, t) in &tallies {
        println!("  {language} | {}", line(t));
        total.clips += t.clips;
        total.detected += t.detected;
        total.errors += t.errors;
        total.words += t.words;
        total.threats += t.threats;
        total.rejected += t.rejected;
        total.harmless += t.harmless;
        total.passed += t.passed;
    }
    println!("  all | {}", line(&total));
    Ok(())
}

fn line(t: &Tally) -> String {
    format!(
        "{}/{} | {:.1} % | {}/{} | {}/{}",
        t.detected,
        t.clips,
        100.0 * t.errors as f64 / t.words.max(1) as f64,
        t.rejected,
        t.threats,
        t.passed,
        t.harmless
    )
}

/// The units the error rate counts: lower-cased words without punctuation, or characters for
/// languages written without spaces.
fn units(text: &str, language: &str) -> Vec<String> {
    let cleaned: String = text
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '\'' {
                c
            } else {
                ' '
            }
        })
        .collect();
    if matches!(language, "zh" | "ja" | "th") {
        cleaned
            .chars()
            .filter(|c| !c.is_whitespace())
            .map(String::from)
            .collect()
    } else {
        cleaned.split_whitespace().map(str::to_owned).collect()
    }
}

/// The edit distance between two sequences.
fn distance(reference: &[String], heard: &[String]) -> usize {
    let mut row: Vec<usize> = (0..=heard.len()).collect();
    for (i, r) in reference.iter().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, h) in heard.iter().enumerate() {
            let substitute = previous + usize::from(r != h);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j + 1] + 1).min(row[j] + 1);
        }
    }
    row[heard.len()]
}
