//! Standard Webhooks signing: `v1,` + base64 HMAC-SHA256 over `id.timestamp.body`, keyed by
//! the bytes of a `whsec_` secret; one signature per signing secret, space separated.

use base64::{engine::general_purpose::STANDARD, Engine};
use ring::{
    hmac,
    rand::{SecureRandom, SystemRandom},
};

/// The prefix of every signing secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a new secret.
const SECRET_BYTES: usize = 24;

/// A secret that is not `whsec_` + base64.
#[derive(Debug, thiserror::Error)]
#[error("a webhook secret must be 'whsec_' followed by base64")]
pub struct BadSecret;

/// A new secret: `whsec_` + base64 of 24 random bytes.
pub fn generate_secret() -> Result<String, crate::crypto::CryptoError> {
    let mut bytes = [0u8; SECRET_BYTES];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| crate::crypto::CryptoError::Random)?;
    Ok(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)))
}

fn key_bytes(secret: &str) -> Result<Vec<u8>, BadSecret> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).ok_or(BadSecret)?;
    STANDARD.decode(encoded).map_err(|_| BadSecret)
}

/// Whether `secret` is a usable signing secret: `whsec_` and the base64 of at least 16 bytes.
pub fn is_valid_secret(secret: &str) -> bool {
    key_bytes(secret).is_ok_and(|key| key.len() >= 16)
}

/// The `v1,<base64>` signature of one message with one secret.
pub fn sign(secret: &str, msg_id: &str, timestamp: i64, body: &[u8]) -> Result<String, BadSecret> {
    let key = hmac::Key::new(hmac::HMAC_SHA256, &key_bytes(secret)?);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(msg_id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    Ok(format!("v1,{}", STANDARD.encode(ctx.sign().as_ref())))
}

/// The `webhook-signature` header value: one signature per secret, space separated.
pub fn signature_header<'a>(
    secrets: impl IntoIterator<Item = &'a str>,
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<String, BadSecret> {
    let signatures = secrets
        .into_iter()
        .map(|s| sign(s, msg_id, timestamp, body))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(signatures.join(" "))
}

/// Why a received webhook does not verify.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The timestamp is further from now than the tolerance.
    #[error("the timestamp is outside the tolerance")]
    Timestamp,
    /// No signature in the header matches.
    #[error("no signature matches")]
    Signature,
}

/// Verifies as a receiver does: the timestamp within `tolerance_secs` of `now`, and at least
/// one `v1` signature in `header` matching `secret` (compared in constant time).
pub fn verify(
    secret: &str,
    msg_id: &str,
    timestamp: i64,
    header: &str,
    body: &[u8],
    now: i64,
    tolerance_secs: i64,
) -> Result<(), VerifyError> {
    if (now - timestamp).abs() > tolerance_secs {
        return Err(VerifyError::Timestamp);
    }
    let key = hmac::Key::new(
        hmac::HMAC_SHA256,
        &key_bytes(secret).map_err(|_| VerifyError::Signature)?,
    );
    let message = [
        msg_id.as_bytes(),
        b".",
        timestamp.to_string().as_bytes(),
        b".",
        body,
    ]
    .concat();
    let matches = header
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|sig| {
            STANDARD
                .decode(sig)
                .is_ok_and(|sig| hmac::verify(&key, &message, &sig).is_ok())
        });
    if matches {
        Ok(())
    } else {
        Err(VerifyError::Signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example of the Standard Webhooks specification.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;

    #[test]
    fn signs_the_specification_example() {
        assert_eq!(
            sign(SECRET, ID, TS, BODY).unwrap(),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn verifies_any_matching_signature_within_tolerance() {
        let other = generate_secret().unwrap();
        let header = signature_header([other.as_str(), SECRET], ID, TS, BODY).unwrap();

        assert_eq!(verify(SECRET, ID, TS, &header, BODY, TS + 300, 300), Ok(()));
        assert_eq!(
            verify(SECRET, ID, TS, &header, BODY, TS + 301, 300),
            Err(VerifyError::Timestamp)
        );
        assert_eq!(
            verify(SECRET, ID, TS, &header, b"{}", TS, 300),
            Err(VerifyError::Signature)
        );
    }

    #[test]
    fn generated_secrets_have_24_bytes() {
        let secret = generate_secret().unwrap();
        assert_eq!(key_bytes(&secret).unwrap().len(), 24);
    }
}
