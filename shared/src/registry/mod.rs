//! The Shared Registry: members report banned users as keyed hashes of their identifiers and
//! check identifiers against other members' reports.
//!
//! This module owns the rules that do not depend on storage or HTTP: email normalisation
//! ([`normalise`]), the identifier key ([`RegistryKey`]), field validation, the entry status
//! machine and the aggregation of matches into signals ([`signals`]). A client's hash is never
//! stored, logged or echoed: only `HMAC-SHA256(APP_REGISTRY_KEY, hash bytes)` is kept.

use std::{fmt, str::FromStr};

use base64::Engine;
use ring::hmac;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::config::{env_raw, ConfigError, Secret};

pub mod normalise;
pub mod quota;
pub mod signals;

/// How long an entry is kept after it was last reported.
pub const RETENTION: time::Duration = time::Duration::days(365);

/// The longest `member_case_ref` and revocation reason, in characters.
pub const MAX_TEXT_CHARS: usize = 200;

/// SHA-256 of the empty string: a client that hashed nothing. Always refused.
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// A reason a user was banned. [`Category::ALL`] is the fixed order of signals.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// `payment_fraud`
    PaymentFraud,
    /// `prohibited_content`
    ProhibitedContent,
    /// `ban_evasion`
    BanEvasion,
}

impl Category {
    /// Every category, in the order signals are listed.
    pub const ALL: [Category; 3] = [
        Category::PaymentFraud,
        Category::ProhibitedContent,
        Category::BanEvasion,
    ];

    /// The wire and column value.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::PaymentFraud => "payment_fraud",
            Category::ProhibitedContent => "prohibited_content",
            Category::BanEvasion => "ban_evasion",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A category name that is not one of [`Category::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown category {0:?} (expected payment_fraud, prohibited_content or ban_evasion)")]
pub struct UnknownCategory(pub String);

impl FromStr for Category {
    type Err = UnknownCategory;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Category::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCategory(s.to_owned()))
    }
}

/// The kind of identifier an entry holds. Only email exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IdentifierType {
    /// An email address, normalised and hashed per [`normalise`].
    Email,
}

/// The status of an entry as shown to its member.
///
/// `active`, `disputed` and `revoked` are stored; `expired` is derived on every read from
/// `expires_at`, so no job has to sweep entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    /// Counts in checks.
    Active,
    /// Under an open dispute; still counts, but never permits automated refusal.
    Disputed,
    /// Withdrawn by its member or after an upheld dispute; never counts.
    Revoked,
    /// Past `expires_at`; never counts.
    Expired,
}

/// The `revoke_reason` of an entry revoked because an operator upheld a dispute.
pub const DISPUTE_UPHELD: &str = "dispute_upheld";

/// An operator's decision on a dispute, run by `modctl registry dispute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisputeAction {
    /// active → disputed.
    Open,
    /// disputed → revoked with reason [`DISPUTE_UPHELD`].
    Uphold,
    /// disputed → active.
    Reject,
}

impl DisputeAction {
    /// Whether the action applies to an entry whose status (as shown) is `status`. Upholding
    /// or rejecting resolves an open dispute even after the entry expired.
    pub fn applies_to(self, status: EntryStatus, has_open_dispute: bool) -> bool {
        match self {
            DisputeAction::Open => status == EntryStatus::Active,
            DisputeAction::Uphold | DisputeAction::Reject => has_open_dispute,
        }
    }

    /// What the action needs, for the message of a refused transition.
    pub fn requirement(self) -> &'static str {
        match self {
            DisputeAction::Open => "a dispute can only be opened on an active entry",
            DisputeAction::Uphold | DisputeAction::Reject => {
                "only an entry with an open dispute can have it upheld or rejected"
            }
        }
    }
}

/// A client's SHA-256 of a normalised identifier. It is only ever used to derive the stored
/// identifier; its `Debug` is redacted so it cannot reach a log by accident.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ClientHash([u8; 32]);

impl fmt::Debug for ClientHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientHash([redacted])")
    }
}

/// Why a `sha256` value is refused. The messages never repeat the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// Not 64 lowercase hex digits.
    #[error("must be 64 lowercase hexadecimal characters (pattern ^[0-9a-f]{{64}}$)")]
    Pattern,
    /// The hash of nothing.
    #[error("is the SHA-256 of the empty string; hash the normalised email address")]
    Empty,
}

impl ClientHash {
    /// Parses `^[0-9a-f]{64}$`, refusing the hash of the empty string.
    pub fn parse(hex_digits: &str) -> Result<Self, HashError> {
        if hex_digits.len() != 64
            || !hex_digits
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(HashError::Pattern);
        }
        if hex_digits == EMPTY_SHA256 {
            return Err(HashError::Empty);
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex_digits, &mut bytes).map_err(|_| HashError::Pattern)?;
        Ok(Self(bytes))
    }
}

/// `APP_REGISTRY_KEY`: the HMAC key turning client hashes into stored identifiers.
#[derive(Clone)]
pub struct RegistryKey(Secret<hmac::Key>);

impl fmt::Debug for RegistryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RegistryKey([redacted])")
    }
}

impl RegistryKey {
    /// The environment variable holding the key.
    pub const ENV: &'static str = "APP_REGISTRY_KEY";

    /// A random key (tests and local tools).
    pub fn random() -> Result<Self, crate::crypto::CryptoError> {
        use ring::rand::SecureRandom;
        let mut bytes = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| crate::crypto::CryptoError::Random)?;
        Ok(Self::from_bytes(&bytes))
    }

    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        Self(Secret::new(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// A key from standard base64 of exactly 32 bytes.
    pub fn from_base64(value: &str) -> Result<Self, ConfigError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .map_err(|_| ConfigError::new(Self::ENV, "must be base64 (standard alphabet)"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
            ConfigError::new(
                Self::ENV,
                format!("must decode to 32 bytes, got {}", b.len()),
            )
        })?;
        Ok(Self::from_bytes(&bytes))
    }

    /// Reads `APP_REGISTRY_KEY`, which is required.
    pub fn from_env() -> Result<Self, ConfigError> {
        let value = env_raw(Self::ENV)?.ok_or_else(|| {
            ConfigError::new(
                Self::ENV,
                "is required: 32 random bytes in base64 (e.g. `head -c 32 /dev/urandom | base64`)",
            )
        })?;
        Self::from_base64(&value)
    }

    /// The stored identifier of a client hash: `HMAC-SHA256(key, hash bytes)`.
    pub fn identify(&self, hash: &ClientHash) -> [u8; 32] {
        let tag = hmac::sign(self.0.expose(), &hash.0);
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }
}

/// Checks a member's free text (`member_case_ref`, a revocation `reason`): 1 to 200
/// characters, no control characters, and no email address in it (it must not hold personal
/// data). The message names the rule, never the value.
pub fn validate_text(field: &str, value: &str) -> Result<(), String> {
    let chars = value.chars().count();
    if chars == 0 || chars > MAX_TEXT_CHARS {
        return Err(format!(
            "{field} must be 1 to {MAX_TEXT_CHARS} characters, got {chars}"
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("{field} must not contain control characters"));
    }
    if contains_email_address(value) {
        return Err(format!(
            "{field} must not contain an email address (no personal data)"
        ));
    }
    Ok(())
}

/// Whether some word of `value` looks like `local@domain.tld`.
fn contains_email_address(value: &str) -> bool {
    value
        .split(|c: char| c.is_whitespace() || "<>()[],;:\"'".contains(c))
        .any(|word| {
            let Some((local, domain)) = word.rsplit_once('@') else {
                return false;
            };
            let domain = domain.trim_end_matches('.');
            !local.is_empty()
                && domain
                    .split_once('.')
                    .is_some_and(|(host, tld)| !host.is_empty() && !tld.is_empty())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_hashes_must_match_the_pattern_and_not_hash_nothing() {
        let good = "16c18d336f0b250f0e2d907452ceb9658a74ecdae8bc94864c23122a72cc27a5";
        assert!(ClientHash::parse(good).is_ok());
        assert_eq!(ClientHash::parse(&good[1..]), Err(HashError::Pattern));
        assert_eq!(
            ClientHash::parse(&good.to_uppercase()),
            Err(HashError::Pattern)
        );
        assert_eq!(
            ClientHash::parse(&format!("{good}0")),
            Err(HashError::Pattern)
        );
        assert_eq!(ClientHash::parse(EMPTY_SHA256), Err(HashError::Empty));
        assert!(!format!("{:?}", ClientHash::parse(good).unwrap()).contains("16c1"));
    }

    #[test]
    fn identifiers_are_keyed_and_differ_from_the_client_hash() {
        let hash = ClientHash::parse(&"ab".repeat(32)).unwrap();
        let a = RegistryKey::from_bytes(&[1; 32]);
        let b = RegistryKey::from_bytes(&[2; 32]);
        assert_eq!(a.identify(&hash), a.identify(&hash));
        assert_ne!(a.identify(&hash), b.identify(&hash));
        assert_ne!(a.identify(&hash), [0xab; 32]);
    }

    #[test]
    fn the_key_must_be_32_bytes_of_base64() {
        let b64 = base64::engine::general_purpose::STANDARD;
        assert!(RegistryKey::from_base64(&b64.encode([7u8; 32])).is_ok());
        let short = RegistryKey::from_base64(&b64.encode([7u8; 31])).unwrap_err();
        assert_eq!(short.name, "APP_REGISTRY_KEY");
        assert!(RegistryKey::from_base64("not base64!").is_err());
    }

    #[test]
    fn member_text_is_bounded_and_free_of_emails_and_control_characters() {
        assert!(validate_text("member_case_ref", "T").is_ok());
        assert!(validate_text("member_case_ref", &"é".repeat(200)).is_ok());
        assert!(validate_text("member_case_ref", &"é".repeat(201)).is_err());
        assert!(validate_text("member_case_ref", "").is_err());
        assert!(validate_text("member_case_ref", "CASE-1\n").is_err());
        assert!(validate_text("member_case_ref", "jane@example.com").is_err());
        assert!(validate_text("member_case_ref", "user <jane@example.com>").is_err());
        assert!(validate_text("member_case_ref", "ticket@42").is_ok());
        assert!(validate_text("member_case_ref", "CASE-2026-0042").is_ok());
    }

    #[test]
    fn dispute_actions_apply_only_from_their_states() {
        use DisputeAction::*;
        use EntryStatus::*;
        assert!(Open.applies_to(Active, false));
        for status in [Disputed, Revoked, Expired] {
            assert!(!Open.applies_to(status, status == Disputed));
        }
        for action in [Uphold, Reject] {
            assert!(action.applies_to(Disputed, true));
            assert!(!action.applies_to(Active, false));
            assert!(!action.applies_to(Revoked, false));
        }
    }
}
