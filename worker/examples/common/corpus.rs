//! Reading the evaluation and training corpora (`eval/`), shared by the examples that use them.

use std::path::Path;

use anyhow::Context;

/// The lines of a corpus file: blank lines and `#` comments left out, line ends trimmed.
pub fn read(path: &Path) -> anyhow::Result<Vec<String>> {
    let raw = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    Ok(raw
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect())
}
