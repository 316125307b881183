//! The text heads' training data, read from the repository: the prototypes (each category's
//! sentences are positives for it, the benign ones negatives for all), the tuned corpus
//! `eval/text/*.tsv`, the training corpus `eval/text/train/*.tsv` and, for the multilingual
//! head, the multilingual training corpus `eval/text/multilingual/train/*.tsv` (a language
//! column first). Never `eval/text/heldout/` nor `eval/text/multilingual/*.tsv`: those only
//! measure.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use moderation_worker::models::text::prototypes;

use super::corpus::read;

/// A labelled training text: `label` is a category, `benign`, `ordinary` or `innocent`.
pub struct Example {
    /// `prototypes`, `tuned`, `train` or `multilingual`.
    pub source: &'static str,
    pub label: String,
    pub text: String,
}

/// The training data under `corpus` (`eval/text`), the multilingual training corpus too when
/// `multilingual`. The prototypes come first.
pub fn examples(corpus: &Path, multilingual: bool) -> anyhow::Result<Vec<Example>> {
    let mut examples = Vec::new();
    for (name, sentences) in prototypes::CATEGORIES {
        for sentence in sentences {
            examples.push(Example {
                source: "prototypes",
                label: name.to_owned(),
                text: (*sentence).to_owned(),
            });
        }
    }
    for sentence in prototypes::BENIGN {
        examples.push(Example {
            source: "prototypes",
            label: "benign".to_owned(),
            text: (*sentence).to_owned(),
        });
    }
    let mut dirs = vec![
        ("tuned", corpus.to_owned(), false),
        ("train", corpus.join("train"), false),
    ];
    if multilingual {
        dirs.push(("multilingual", corpus.join("multilingual/train"), true));
    }
    for (source, dir, languages) in dirs {
        // A multilingual file's lines start with their language, which training ignores.
        let strip = |line: String| -> anyhow::Result<String> {
            if !languages {
                return Ok(line);
            }
            let (_, rest) = line
                .split_once('\t')
                .with_context(|| format!("{}: no language in {line:?}", dir.display()))?;
            Ok(rest.to_owned())
        };
        for line in read(&dir.join("harmful.tsv"))? {
            let line = strip(line)?;
            let (label, text) = line
                .split_once('\t')
                .with_context(|| format!("{}: no tab in {line:?}", dir.display()))?;
            if !prototypes::CATEGORIES
                .iter()
                .any(|(name, _)| *name == label)
            {
                bail!("{}: unknown category {label:?}", dir.display());
            }
            examples.push(Example {
                source,
                label: label.to_owned(),
                text: text.to_owned(),
            });
        }
        for file in ["ordinary.tsv", "innocent.tsv"] {
            for line in read(&dir.join(file))? {
                examples.push(Example {
                    source,
                    label: file.trim_end_matches(".tsv").to_owned(),
                    text: strip(line)?,
                });
            }
        }
    }
    Ok(examples)
}

/// A trainer's arguments, `MODEL_DIR [--out FILE]`: the model directory and where to write the
/// weights (`default_out`, relative to the repository, unless `--out` says otherwise).
pub fn arguments(name: &str, default_out: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut args = std::env::args().skip(1);
    let Some(models) = args.next() else {
        bail!("usage: {name} MODEL_DIR [--out FILE]");
    };
    let mut out = repo.join(default_out);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--out", Some(file)) => out = PathBuf::from(file),
            _ => bail!("unknown argument {flag}"),
        }
    }
    Ok((PathBuf::from(models), out))
}
