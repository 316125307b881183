//! Hashes of media for the hash banks: exact SHA-256 of the bytes, and the PDQ perceptual hash
//! of an image (256 bits; near-identical images are a small Hamming distance apart).

use std::io::Cursor;

use pdqhash::image::{self, io::Reader};

/// The most pixels an image may have to be decoded for hashing (about 25 megapixels), so a
/// small file declaring huge dimensions cannot exhaust memory.
pub const MAX_PIXELS: u64 = 25_000_000;

/// Why an image could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum MediaHashError {
    /// Not an image in a format we decode, or corrupt.
    #[error("the image could not be decoded")]
    Undecodable,
    /// More than [`MAX_PIXELS`] pixels.
    #[error("the image is too large to decode")]
    TooLarge,
    /// Smaller than PDQ can hash (5×5).
    #[error("the image is too small to hash")]
    TooSmall,
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The PDQ hash of the image in `bytes`.
pub fn pdq(bytes: &[u8]) -> Result<[u8; 32], MediaHashError> {
    let reader = || {
        Reader::new(Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|_| MediaHashError::Undecodable)
    };
    let (width, height) = reader()?
        .into_dimensions()
        .map_err(|_| MediaHashError::Undecodable)?;
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(MediaHashError::TooLarge);
    }
    let decoded: image::DynamicImage = reader()?
        .decode()
        .map_err(|_| MediaHashError::Undecodable)?;
    pdqhash::generate_pdq(&decoded)
        .map(|(hash, _quality)| hash)
        .ok_or(MediaHashError::TooSmall)
}

/// The number of bits in which `a` and `b` differ.
pub fn hamming(a: &[u8; 32], b: &[u8; 32]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}
