//! Sealing secrets at rest with AES-256-GCM under `APP_ENCRYPTION_KEY`.

use base64::{engine::general_purpose::STANDARD, Engine};
use ring::{
    aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM},
    rand::{SecureRandom, SystemRandom},
};

use crate::config::{env_raw, ConfigError, Secret};

/// A sealing key: 32 bytes, given base64-encoded.
#[derive(Clone)]
pub struct SealingKey(Secret<[u8; 32]>);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey([redacted])")
    }
}

/// Sealing or opening failed.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    /// The random source failed.
    #[error("the system random source failed")]
    Random,
    /// The ciphertext did not authenticate (wrong key, or tampered).
    #[error("a sealed secret could not be opened (wrong APP_ENCRYPTION_KEY?)")]
    Open,
}

impl SealingKey {
    /// Parses a base64 32-byte key; `name` is the variable it came from.
    pub fn parse(name: &'static str, value: &str) -> Result<Self, ConfigError> {
        let bytes = STANDARD
            .decode(value.trim())
            .map_err(|e| ConfigError::new(name, format!("not base64: {e}")))?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| ConfigError::new(name, "must decode to exactly 32 bytes"))?;
        Ok(Self(Secret::new(key)))
    }

    /// Reads `APP_ENCRYPTION_KEY` (required).
    pub fn from_env() -> Result<Self, ConfigError> {
        let value = env_raw("APP_ENCRYPTION_KEY")?.ok_or_else(|| {
            ConfigError::new(
                "APP_ENCRYPTION_KEY",
                "required: 32 random bytes, base64-encoded",
            )
        })?;
        Self::parse("APP_ENCRYPTION_KEY", &value)
    }

    /// A random key (tests and local tools).
    pub fn random() -> Result<Self, CryptoError> {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| CryptoError::Random)?;
        Ok(Self(Secret::new(key)))
    }

    /// The key as base64, for handing to another process of the same deployment.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0.expose())
    }

    fn aead(&self) -> LessSafeKey {
        // A 32-byte key is always valid for AES-256-GCM.
        LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, self.0.expose()).unwrap_or_else(|_| unreachable!()),
        )
    }

    /// Seals `plaintext` bound to `context` (e.g. the owning row's ids); returns the nonce and
    /// the ciphertext with its tag.
    pub fn seal(
        &self,
        context: &[u8],
        plaintext: &[u8],
    ) -> Result<([u8; 12], Vec<u8>), CryptoError> {
        let mut nonce = [0u8; 12];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| CryptoError::Random)?;
        let mut sealed = plaintext.to_vec();
        self.aead()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context),
                &mut sealed,
            )
            .map_err(|_| CryptoError::Random)?;
        Ok((nonce, sealed))
    }

    /// Opens what [`SealingKey::seal`] sealed with the same `context`.
    pub fn open(
        &self,
        context: &[u8],
        nonce: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, CryptoError> {
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::Open)?;
        let mut buf = sealed.to_vec();
        let plain = self
            .aead()
            .open_in_place(nonce, Aad::from(context), &mut buf)
            .map_err(|_| CryptoError::Open)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secrets_open_only_with_the_same_key_and_context() {
        let key = SealingKey::random().unwrap();
        let other = SealingKey::random().unwrap();
        let (nonce, sealed) = key.seal(b"ctx", b"whsec_abc").unwrap();

        assert_eq!(key.open(b"ctx", &nonce, &sealed).unwrap(), b"whsec_abc");
        assert!(key.open(b"other", &nonce, &sealed).is_err());
        assert!(other.open(b"ctx", &nonce, &sealed).is_err());
        assert!(!sealed.windows(9).any(|w| w == b"whsec_abc"));
    }

    #[test]
    fn keys_must_be_32_bytes_of_base64() {
        assert!(SealingKey::parse("K", &STANDARD.encode([1u8; 32])).is_ok());
        assert!(SealingKey::parse("K", &STANDARD.encode([1u8; 31])).is_err());
        assert!(SealingKey::parse("K", "not base64!").is_err());
    }
}
