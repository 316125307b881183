//! Hashes of media for the hash banks: the exact SHA-256 of the bytes, and the PDQ perceptual
//! hash of an image (256 bits; the same picture re-encoded or resized lands a small Hamming
//! distance away, unrelated pictures about 128 bits apart).
//!
//! Images are decoded with the `image` crate, PNG, JPEG, GIF (first frame) and WebP only, under
//! [`MAX_SIDE`] and [`MAX_DECODE_BYTES`], so a small file declaring a huge picture is refused
//! before anything large is allocated. The `pdqhash` crate hashes; it speaks an older `image`
//! version, so the decoded picture (shrunk first to the 512-pixel size PDQ works from) is
//! handed over as raw RGB.

use std::io::Cursor;

use image::{
    error::{ImageError, ParameterError, ParameterErrorKind},
    DynamicImage, ImageFormat, ImageReader, Limits,
};

/// The widest or tallest image decoded, in pixels.
pub const MAX_SIDE: u32 = 16_384;
/// The most memory the decoder may allocate for one image (its output included): 256 MiB.
pub const MAX_DECODE_BYTES: u64 = 256 * 1024 * 1024;
/// The Hamming distance at or under which two PDQ hashes are taken for the same picture (the
/// threshold Meta recommends).
pub const PDQ_MATCH_DISTANCE: u32 = 31;

/// PDQ works from a picture of at most this many pixels on a side; larger ones are shrunk.
const PDQ_WORKING_SIDE: u32 = 512;
/// The formats decoded.
const FORMATS: [ImageFormat; 4] = [
    ImageFormat::Png,
    ImageFormat::Jpeg,
    ImageFormat::Gif,
    ImageFormat::WebP,
];

/// Why bytes could not be PDQ-hashed.
#[derive(Debug, thiserror::Error)]
pub enum MediaHashError {
    /// Not a PNG, JPEG, GIF or WebP image.
    #[error("not an image in a supported format (PNG, JPEG, GIF or WebP)")]
    Unsupported,
    /// The image is wider or taller than [`MAX_SIDE`], or needs more than
    /// [`MAX_DECODE_BYTES`] to decode.
    #[error("the image is too large to decode")]
    TooLarge,
    /// The image is corrupt or truncated.
    #[error("the image could not be decoded")]
    Undecodable(#[source] ImageError),
    /// Smaller than PDQ can hash (5 pixels on a side).
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
    let picture = decode(bytes)?;
    let (width, height) = (picture.width(), picture.height());
    let picture = if width > PDQ_WORKING_SIDE || height > PDQ_WORKING_SIDE {
        picture.thumbnail_exact(width.min(PDQ_WORKING_SIDE), height.min(PDQ_WORKING_SIDE))
    } else {
        picture
    };
    let rgb = picture.into_rgb8();
    let (width, height) = rgb.dimensions();
    let handed_over = pdqhash::image::RgbImage::from_raw(width, height, rgb.into_raw())
        .ok_or_else(|| {
            MediaHashError::Undecodable(ImageError::Parameter(ParameterError::from_kind(
                ParameterErrorKind::DimensionMismatch,
            )))
        })?;
    pdqhash::generate_pdq(&pdqhash::image::DynamicImage::ImageRgb8(handed_over))
        .map(|(hash, _quality)| hash)
        .ok_or(MediaHashError::TooSmall)
}

/// The number of bits in which `a` and `b` differ (0 to 256).
pub fn hamming(a: &[u8; 32], b: &[u8; 32]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Decodes an image of one of [`FORMATS`] within the limits.
fn decode(bytes: &[u8]) -> Result<DynamicImage, MediaHashError> {
    let mut reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|_| MediaHashError::Unsupported)?;
    if !reader.format().is_some_and(|f| FORMATS.contains(&f)) {
        return Err(MediaHashError::Unsupported);
    }
    let mut limits = Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    reader.decode().map_err(|e| match e {
        ImageError::Limits(_) => MediaHashError::TooLarge,
        ImageError::Unsupported(_) => MediaHashError::Unsupported,
        other => MediaHashError::Undecodable(other),
    })
}

#[cfg(test)]
mod tests {
    use std::f32::consts::TAU;

    use image::{codecs::jpeg::JpegEncoder, imageops::FilterType, RgbImage};

    use super::*;

    /// A 256×256 picture with smooth structure that depends on `seed`.
    fn scene(seed: u32) -> DynamicImage {
        let s = seed as f32;
        DynamicImage::ImageRgb8(RgbImage::from_fn(256, 256, |x, y| {
            let (u, v) = (x as f32 / 256.0, y as f32 / 256.0);
            let wave = (u * (1.0 + s) * TAU).sin() * (v * (2.0 + s * 0.7) * TAU + s).cos();
            let disc = if (u - 0.3 - 0.1 * s).powi(2) + (v - 0.6).powi(2) < 0.04 {
                90.0
            } else {
                0.0
            };
            let level = (128.0 + 100.0 * wave + disc).clamp(0.0, 255.0) as u8;
            image::Rgb([level, level.wrapping_add((40.0 * s) as u8), 255 - level])
        }))
    }

    fn encode(picture: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        picture.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    fn jpeg(picture: &DynamicImage, quality: u8) -> Vec<u8> {
        let mut out = Vec::new();
        JpegEncoder::new_with_quality(&mut out, quality)
            .encode_image(picture)
            .unwrap();
        out
    }

    /// A PNG of 1×1 whose header claims `width`×`height` (with a valid header checksum).
    fn png_claiming(width: u32, height: u32) -> Vec<u8> {
        let mut png = encode(
            &DynamicImage::ImageRgba8(image::RgbaImage::new(1, 1)),
            ImageFormat::Png,
        );
        // Signature (8), IHDR length (4), "IHDR" at 12..16, width at 16..20, height at 20..24,
        // the rest of the header to 29, its CRC at 29..33.
        png[16..20].copy_from_slice(&width.to_be_bytes());
        png[20..24].copy_from_slice(&height.to_be_bytes());
        let crc = crc32(&png[12..29]);
        png[29..33].copy_from_slice(&crc.to_be_bytes());
        png
    }

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in bytes {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn the_same_image_has_distance_zero() {
        let png = encode(&scene(1), ImageFormat::Png);

        let (a, b) = (pdq(&png).unwrap(), pdq(&png).unwrap());

        assert_eq!(hamming(&a, &b), 0);
    }

    #[test]
    fn the_same_image_in_every_supported_format_stays_close() {
        let picture = scene(1);
        let original = pdq(&encode(&picture, ImageFormat::Png)).unwrap();

        let others = [
            ("jpeg", jpeg(&picture, 75)),
            ("gif", encode(&picture, ImageFormat::Gif)),
            ("webp", encode(&picture, ImageFormat::WebP)),
        ];

        for (format, bytes) in others {
            let distance = hamming(&original, &pdq(&bytes).unwrap());
            assert!(
                distance <= PDQ_MATCH_DISTANCE,
                "{format}: distance {distance}"
            );
        }
    }

    #[test]
    fn a_slightly_resized_image_stays_close() {
        let picture = scene(2);
        let original = pdq(&encode(&picture, ImageFormat::Png)).unwrap();

        let smaller = picture.resize_exact(230, 230, FilterType::Triangle);
        let larger = picture.resize_exact(600, 600, FilterType::CatmullRom);

        for resized in [smaller, larger] {
            let distance = hamming(&original, &pdq(&jpeg(&resized, 85)).unwrap());
            assert!(
                distance <= PDQ_MATCH_DISTANCE,
                "{}×{}: distance {distance}",
                resized.width(),
                resized.height()
            );
        }
    }

    #[test]
    fn unrelated_images_are_far_apart() {
        let a = pdq(&encode(&scene(1), ImageFormat::Png)).unwrap();
        let b = pdq(&encode(&scene(4), ImageFormat::Png)).unwrap();

        let distance = hamming(&a, &b);

        assert!(distance > 2 * PDQ_MATCH_DISTANCE, "distance {distance}");
    }

    #[test]
    fn garbage_bytes_are_not_an_image() {
        assert!(matches!(
            pdq(b"definitely not an image at all"),
            Err(MediaHashError::Unsupported)
        ));
        assert!(matches!(pdq(b""), Err(MediaHashError::Unsupported)));
    }

    #[test]
    fn a_format_outside_the_four_is_refused_before_decoding() {
        let mut bmp = b"BM".to_vec();
        bmp.resize(64, 0);

        assert!(matches!(pdq(&bmp), Err(MediaHashError::Unsupported)));
    }

    #[test]
    fn a_truncated_image_is_undecodable() {
        let png = encode(&scene(1), ImageFormat::Png);

        let result = pdq(&png[..png.len() / 2]);

        assert!(
            matches!(result, Err(MediaHashError::Undecodable(_))),
            "{result:?}"
        );
    }

    #[test]
    fn a_decompression_bomb_is_refused_without_decoding() {
        let over_a_side = png_claiming(MAX_SIDE + 1, 8);
        let at_the_sides = png_claiming(MAX_SIDE, MAX_SIDE);

        assert!(matches!(pdq(&over_a_side), Err(MediaHashError::TooLarge)));
        // 16384² RGBA pixels need 1 GiB, over the decoder's budget.
        assert!(matches!(pdq(&at_the_sides), Err(MediaHashError::TooLarge)));
    }

    #[test]
    fn an_image_under_five_pixels_on_a_side_is_too_small() {
        let tiny = encode(
            &DynamicImage::ImageRgb8(RgbImage::new(4, 40)),
            ImageFormat::Png,
        );
        let smallest = encode(
            &scene(1).resize_exact(5, 5, FilterType::Triangle),
            ImageFormat::Png,
        );

        assert!(matches!(pdq(&tiny), Err(MediaHashError::TooSmall)));
        assert!(pdq(&smallest).is_ok());
    }

    #[test]
    fn sha256_matches_the_known_digest() {
        assert_eq!(
            hex::encode(sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hamming_counts_differing_bits() {
        let zero = [0u8; 32];
        let mut some = [0u8; 32];
        some[0] = 0b1011;
        some[31] = 0x80;

        assert_eq!(hamming(&zero, &zero), 0);
        assert_eq!(hamming(&zero, &some), 4);
        assert_eq!(hamming(&zero, &[0xFF; 32]), 256);
    }
}
