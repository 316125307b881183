//! Which model files a worker loaded: the SHA-256 of each model's files, and an id for the
//! whole set (`model_sets.id`), so an operator can tell which models scored a job.

use std::{collections::BTreeMap, io::Read, path::Path};

use ring::digest::{Context, SHA256};

/// The models a worker loaded, by name, each with the SHA-256 of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSet {
    /// The first 16 hex digits of the SHA-256 of every `name=hash` line, in name order.
    pub id: String,
    /// Each model's hash: the SHA-256 (hex) of its files' hashes in the order it names them.
    pub models: BTreeMap<String, String>,
}

impl ModelSet {
    /// The set of `models`, each `(name, hash)`; `None` when there are none.
    pub fn new(models: BTreeMap<String, String>) -> Option<Self> {
        if models.is_empty() {
            return None;
        }
        let lines: String = models
            .iter()
            .map(|(name, hash)| format!("{name}={hash}\n"))
            .collect();
        let id = hex(ring::digest::digest(&SHA256, lines.as_bytes()).as_ref());
        Some(Self {
            id: id[..16].to_owned(),
            models,
        })
    }
}

/// The SHA-256 (hex) of the SHA-256s of `files`, read in `dir` in the order given.
pub fn hash_files(dir: &Path, files: &[&str]) -> std::io::Result<String> {
    let mut all = Context::new(&SHA256);
    for file in files {
        let mut one = Context::new(&SHA256);
        let mut reader = std::fs::File::open(dir.join(file))?;
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let read = reader.read(&mut buffer)?;
            if read == 0 {
                break;
            }
            one.update(&buffer[..read]);
        }
        all.update(one.finish().as_ref());
    }
    Ok(hex(all.finish().as_ref()))
}

/// The hash of a model computed another way than its files' plain reading (`variant`, such as
/// `int8` for weights quantised at load): it scores apart, so its hash differs from `hash`.
pub fn variant_hash(hash: &str, variant: &str) -> String {
    hex(ring::digest::digest(&SHA256, format!("{hash}+{variant}").as_bytes()).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_named_by_its_models_and_their_hashes() {
        let one = ModelSet::new([("nsfw".to_owned(), "aa".to_owned())].into()).unwrap();
        let other = ModelSet::new([("nsfw".to_owned(), "ab".to_owned())].into()).unwrap();
        assert_eq!(one.id.len(), 16);
        assert_ne!(one.id, other.id);
        assert_eq!(ModelSet::new(BTreeMap::new()), None);
    }

    #[test]
    fn files_hash_in_the_order_given() {
        let dir = std::env::temp_dir().join(format!("model-set-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), b"first").unwrap();
        std::fs::write(dir.join("b"), b"second").unwrap();
        let ab = hash_files(&dir, &["a", "b"]).unwrap();
        let ba = hash_files(&dir, &["b", "a"]).unwrap();
        assert_ne!(ab, ba);
        assert_eq!(ab, hash_files(&dir, &["a", "b"]).unwrap());
        assert_ne!(variant_hash(&ab, "int8"), ab);
        assert_eq!(variant_hash(&ab, "int8"), variant_hash(&ab, "int8"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
