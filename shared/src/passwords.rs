//! Dashboard passwords: Argon2id (the crate's default parameters, version 0x13), stored as a
//! PHC string that carries its own salt and parameters, so stronger parameters later still
//! verify older hashes.

use argon2::{
    password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};
use ring::rand::{SecureRandom, SystemRandom};

/// The shortest password accepted.
pub const MIN_LEN: usize = 12;
/// The longest password accepted (hashing cost grows with it).
pub const MAX_LEN: usize = 1024;

/// Why a password could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// Too short or too long.
    #[error("a password must be {MIN_LEN} to {MAX_LEN} characters")]
    Length,
    /// The random source failed.
    #[error("the system random source failed")]
    Random,
    /// Argon2 refused its input.
    #[error("hashing the password failed: {0}")]
    Hash(String),
}

/// Hashes `password` with a fresh random salt; the PHC string (`$argon2id$v=19$...`).
pub fn hash(password: &str) -> Result<String, PasswordError> {
    let length = password.chars().count();
    if !(MIN_LEN..=MAX_LEN).contains(&length) {
        return Err(PasswordError::Length);
    }
    let mut salt = [0u8; 16];
    SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| PasswordError::Random)?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| PasswordError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// Whether `password` matches the stored `phc` hash. A malformed hash matches nothing.
pub fn verify(password: &str, phc: &str) -> bool {
    if password.len() > MAX_LEN * 4 {
        return false;
    }
    PasswordHash::new(phc).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// A hash of a random password no one knows. A sign-in for an unknown address verifies
/// against it, so that it takes as long as one for a known address.
pub fn decoy() -> Result<String, PasswordError> {
    let mut secret = [0u8; 24];
    SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| PasswordError::Random)?;
    hash(&hex::encode(secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_is_argon2id_and_verifies_only_its_password() {
        let phc = hash("correct horse battery").unwrap();
        assert!(phc.starts_with("$argon2id$v=19$"), "{phc}");
        assert!(verify("correct horse battery", &phc));
        assert!(!verify("correct horse batterx", &phc));
    }

    #[test]
    fn short_passwords_are_refused_and_malformed_hashes_match_nothing() {
        assert!(matches!(hash("short"), Err(PasswordError::Length)));
        assert!(!verify("anything at all", "not a hash"));
        assert!(!verify("anything at all", &decoy().unwrap()));
    }
}
