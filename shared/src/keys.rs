//! API keys: `msk_<8-char prefix>_<40 random chars>`. Only the SHA-256 of the whole key is
//! stored; the prefix is what people see afterwards.

use ring::{
    digest,
    rand::{SecureRandom, SystemRandom},
};

const PREFIX_LEN: usize = 8;
const SECRET_LEN: usize = 40;
const MIN_SECRET_LEN: usize = 32;
const MAX_KEY_LEN: usize = 200;
const LOWER_ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A freshly generated key: the full value is shown once and never stored.
#[derive(Debug)]
pub struct GeneratedKey {
    /// The full key, e.g. `msk_ab12cd34_…`.
    pub key: String,
    /// The 8-character prefix kept for display.
    pub prefix: String,
    /// SHA-256 of `key`, the only form stored.
    pub hash: [u8; 32],
}

/// The random source failed (the OS refused entropy).
#[derive(Debug, thiserror::Error)]
#[error("the system random source failed")]
pub struct RandomError;

/// Generates a new key.
pub fn generate() -> Result<GeneratedKey, RandomError> {
    let rng = SystemRandom::new();
    let prefix = random_chars(&rng, LOWER_ALNUM, PREFIX_LEN)?;
    let secret = random_chars(&rng, ALNUM, SECRET_LEN)?;
    let key = format!("msk_{prefix}_{secret}");
    let hash = hash(&key);
    Ok(GeneratedKey { key, prefix, hash })
}

/// SHA-256 of a presented key.
pub fn hash(key: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, key.as_bytes()).as_ref());
    out
}

/// Whether `key` has the shape of one of our keys. Malformed keys are refused without a
/// database lookup.
pub fn is_well_formed(key: &str) -> bool {
    if key.len() > MAX_KEY_LEN {
        return false;
    }
    let Some(rest) = key.strip_prefix("msk_") else {
        return false;
    };
    let Some((prefix, secret)) = rest.split_once('_') else {
        return false;
    };
    prefix.len() == PREFIX_LEN
        && prefix.bytes().all(|b| LOWER_ALNUM.contains(&b))
        && secret.len() >= MIN_SECRET_LEN
        && secret.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn random_chars(rng: &SystemRandom, alphabet: &[u8], len: usize) -> Result<String, RandomError> {
    // Rejection sampling keeps every character equally likely.
    let limit = 256 - (256 % alphabet.len());
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        rng.fill(&mut buf).map_err(|_| RandomError)?;
        for &b in &buf {
            if (b as usize) < limit && out.len() < len {
                out.push(alphabet[b as usize % alphabet.len()] as char);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert!(is_well_formed(&a.key), "{}", a.key);
        assert_ne!(a.key, b.key);
        assert_eq!(a.hash, hash(&a.key));
        assert!(a.key.starts_with(&format!("msk_{}_", a.prefix)));
    }

    #[test]
    fn malformed_keys_are_recognised() {
        for bad in [
            "",
            "msk_",
            "sk_abcdefgh_0123456789abcdef0123456789abcdef",
            "msk_ABCDEFGH_0123456789abcdef0123456789abcdef",
            "msk_abcdefg_0123456789abcdef0123456789abcdef",
            "msk_abcdefgh_short",
            "msk_abcdefgh_0123456789abcdef0123456789abcde!",
        ] {
            assert!(!is_well_formed(bad), "{bad}");
        }
    }
}
