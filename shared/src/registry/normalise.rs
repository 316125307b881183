//! Email normalisation, version 1: the published rule members hash identifiers with.
//!
//! Trim ASCII whitespace; require exactly one `@` with a non-empty local part and domain;
//! lowercase ASCII `A`-`Z` only; `googlemail.com` becomes `gmail.com`; for `gmail.com` cut the
//! local part at the first `+` and delete every `.`; then SHA-256 of the UTF-8 bytes as
//! lowercase hex. `docs/registry.md` publishes the same rule with its test vectors.

use ring::digest;

/// The version of these rules, sent as `normalisation_version` in check responses.
pub const NORMALISATION_VERSION: u32 = 1;

/// Why an address cannot be normalised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormaliseError {
    /// Not exactly one `@`.
    #[error("an email address needs exactly one '@'")]
    AtSign,
    /// Nothing before the `@`.
    #[error("the local part (before '@') is empty")]
    EmptyLocalPart,
    /// Nothing after the `@`.
    #[error("the domain (after '@') is empty")]
    EmptyDomain,
}

/// A normalised address and its hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NormalisedEmail {
    /// The normalised address.
    pub normalised: String,
    /// Lowercase hex SHA-256 of its UTF-8 bytes.
    pub sha256: String,
    /// Always [`NORMALISATION_VERSION`].
    pub normalisation_version: u32,
}

/// Normalises `email` per version 1 and hashes it.
pub fn normalise(email: &str) -> Result<NormalisedEmail, NormaliseError> {
    let trimmed = email.trim_matches(|c: char| c.is_ascii_whitespace());
    let mut parts = trimmed.split('@');
    let (Some(local), Some(domain), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(NormaliseError::AtSign);
    };
    if local.is_empty() {
        return Err(NormaliseError::EmptyLocalPart);
    }
    if domain.is_empty() {
        return Err(NormaliseError::EmptyDomain);
    }
    let mut local = local.to_ascii_lowercase();
    let mut domain = domain.to_ascii_lowercase();
    if domain == "googlemail.com" {
        domain = "gmail.com".to_owned();
    }
    if domain == "gmail.com" {
        if let Some(plus) = local.find('+') {
            local.truncate(plus);
        }
        local.retain(|c| c != '.');
        // `+tag@gmail.com` or `...@gmail.com` leave nothing to identify a mailbox.
        if local.is_empty() {
            return Err(NormaliseError::EmptyLocalPart);
        }
    }
    let normalised = format!("{local}@{domain}");
    let sha256 = hex::encode(digest::digest(&digest::SHA256, normalised.as_bytes()));
    Ok(NormalisedEmail {
        normalised,
        sha256,
        normalisation_version: NORMALISATION_VERSION,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(email: &str) -> String {
        normalise(email).unwrap().sha256
    }

    #[test]
    fn the_published_vectors_hash_as_documented() {
        assert_eq!(
            hash("MyEmail@example.com"),
            "16c18d336f0b250f0e2d907452ceb9658a74ecdae8bc94864c23122a72cc27a5"
        );
        let jane = "92ee26057ed9dea2535d6c8b141d48373932476599196e00352254896db5888f";
        assert_eq!(hash("JANE.SAOIRSE@gmail.com"), jane);
        assert_eq!(hash("Jane.Saoirse+Work@GoogleMail.com"), jane);
    }

    #[test]
    fn ascii_whitespace_is_trimmed_and_only_ascii_letters_are_lowered() {
        let out = normalise(" \t\r\nMyEmail@Example.COM \n").unwrap();
        assert_eq!(out.normalised, "myemail@example.com");
        assert_eq!(
            normalise("ÉMILE@Example.com").unwrap().normalised,
            "Émile@example.com"
        );
        // U+00A0 is not ASCII whitespace: it stays.
        assert_eq!(normalise("\u{a0}a@b.c").unwrap().normalised, "\u{a0}a@b.c");
    }

    #[test]
    fn dots_and_plus_tags_are_removed_only_for_gmail() {
        assert_eq!(
            normalise("j.a.n.e+x+y@googlemail.com").unwrap().normalised,
            "jane@gmail.com"
        );
        assert_eq!(
            normalise("j.ane+x@example.com").unwrap().normalised,
            "j.ane+x@example.com"
        );
        assert_eq!(
            normalise("jane@mail.gmail.com").unwrap().normalised,
            "jane@mail.gmail.com"
        );
    }

    #[test]
    fn malformed_addresses_are_refused() {
        assert_eq!(normalise("no-at-sign"), Err(NormaliseError::AtSign));
        assert_eq!(normalise("a@b@c"), Err(NormaliseError::AtSign));
        assert_eq!(
            normalise("@example.com"),
            Err(NormaliseError::EmptyLocalPart)
        );
        assert_eq!(normalise("jane@"), Err(NormaliseError::EmptyDomain));
        assert_eq!(normalise("   "), Err(NormaliseError::AtSign));
        assert_eq!(
            normalise("+tag@gmail.com"),
            Err(NormaliseError::EmptyLocalPart)
        );
    }

    #[test]
    fn the_version_is_one() {
        assert_eq!(normalise("a@b").unwrap().normalisation_version, 1);
    }
}
