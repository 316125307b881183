//! Idempotent submissions: the client's `Idempotency-Key` and the fingerprint of the request it
//! was first sent with.

use std::{fmt, time::Duration};

/// How long a key answers with its job; past it the key is forgotten and may be used again.
pub const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// A client's `Idempotency-Key`: 1 to 255 printable ASCII characters (space to `~`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(String);

/// Why a value is not an [`IdempotencyKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidIdempotencyKey {
    /// Nothing.
    #[error("the Idempotency-Key header must not be empty")]
    Empty,
    /// More than [`MAX_IDEMPOTENCY_KEY_LEN`] bytes.
    #[error("the Idempotency-Key header holds {0} bytes; at most 255 are allowed")]
    TooLong(usize),
    /// A byte outside printable ASCII.
    #[error("the Idempotency-Key header must be printable ASCII (byte {0:#04x} is not)")]
    NotPrintable(u8),
}

impl IdempotencyKey {
    /// Checks the raw header value.
    pub fn parse(raw: &[u8]) -> Result<Self, InvalidIdempotencyKey> {
        if raw.is_empty() {
            return Err(InvalidIdempotencyKey::Empty);
        }
        if raw.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(InvalidIdempotencyKey::TooLong(raw.len()));
        }
        if let Some(&byte) = raw.iter().find(|b| !(b' '..=b'~').contains(*b)) {
            return Err(InvalidIdempotencyKey::NotPrintable(byte));
        }
        // Printable ASCII is UTF-8.
        Ok(Self(raw.iter().map(|&b| char::from(b)).collect()))
    }

    /// The key as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The SHA-256 of a validated request: equal for two requests exactly when their endpoint and
/// every field they set are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestFingerprint(pub [u8; 32]);

impl RequestFingerprint {
    /// Hashes `fields` in order, each an absent value or bytes. Every field is written with a
    /// presence byte and its length, so no two different lists hash alike by running one
    /// field into the next.
    pub fn of<'a>(fields: impl IntoIterator<Item = Option<&'a [u8]>>) -> Self {
        let mut context = ring::digest::Context::new(&ring::digest::SHA256);
        for field in fields {
            match field {
                None => context.update(&[0]),
                Some(bytes) => {
                    context.update(&[1]);
                    context.update(&(bytes.len() as u64).to_be_bytes());
                    context.update(bytes);
                }
            }
        }
        let mut hash = [0; 32];
        hash.copy_from_slice(context.finish().as_ref());
        Self(hash)
    }
}

/// A key and the fingerprint of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The client's key.
    pub key: IdempotencyKey,
    /// The request's fingerprint.
    pub fingerprint: RequestFingerprint,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_1_to_255_printable_ascii_bytes() {
        assert!(IdempotencyKey::parse(b"a").is_ok());
        assert!(IdempotencyKey::parse(b" order 42 ~!").is_ok());
        assert!(IdempotencyKey::parse(&[b'k'; 255]).is_ok());
        assert_eq!(
            IdempotencyKey::parse(&[b'k'; 256]),
            Err(InvalidIdempotencyKey::TooLong(256))
        );
        assert_eq!(
            IdempotencyKey::parse(b""),
            Err(InvalidIdempotencyKey::Empty)
        );
        assert_eq!(
            IdempotencyKey::parse(b"a\tb"),
            Err(InvalidIdempotencyKey::NotPrintable(b'\t'))
        );
        assert_eq!(
            IdempotencyKey::parse("caf\u{e9}".as_bytes()),
            Err(InvalidIdempotencyKey::NotPrintable(0xc3))
        );
        assert_eq!(
            IdempotencyKey::parse(b"x\x7f"),
            Err(InvalidIdempotencyKey::NotPrintable(0x7f))
        );
    }

    #[test]
    fn fingerprints_differ_when_any_field_or_the_field_boundaries_differ() {
        let fp = |fields: &[Option<&str>]| {
            RequestFingerprint::of(fields.iter().map(|f| f.map(str::as_bytes)))
        };

        assert_eq!(fp(&[Some("a"), None]), fp(&[Some("a"), None]));
        assert_ne!(fp(&[Some("a"), None]), fp(&[Some("a"), Some("")]));
        assert_ne!(fp(&[Some("ab"), Some("c")]), fp(&[Some("a"), Some("bc")]));
        assert_ne!(fp(&[Some("a"), Some("b")]), fp(&[Some("b"), Some("a")]));
    }
}
