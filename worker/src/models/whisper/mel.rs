//! Whisper's input: the 80-bin log-mel spectrogram of a 30 s window (400-sample FFT, hop 160),
//! with the mel filter bank computed here as librosa does it (Slaney's mel scale and area
//! normalisation), the bank OpenAI's Whisper ships.

use candle_transformers::models::whisper::{self as m, Config};
use rustfft::{num_complex::Complex, FftPlanner};

use super::pcm::SAMPLE_RATE;

/// The filter bank for `mels` bins over the `m::N_FFT / 2 + 1` FFT bins, row-major
/// (`mels` rows).
pub fn filters(mels: usize) -> Vec<f32> {
    let bins = m::N_FFT / 2 + 1;
    let nyquist = f64::from(SAMPLE_RATE) / 2.0;
    let fft_freqs: Vec<f64> = (0..bins)
        .map(|i| nyquist * i as f64 / (bins - 1) as f64)
        .collect();
    let top = hz_to_mel(nyquist);
    let mel_freqs: Vec<f64> = (0..mels + 2)
        .map(|i| mel_to_hz(top * i as f64 / (mels + 1) as f64))
        .collect();
    let mut bank = vec![0.0f32; mels * bins];
    for mel in 0..mels {
        let (low, centre, high) = (mel_freqs[mel], mel_freqs[mel + 1], mel_freqs[mel + 2]);
        // Each triangle has unit area: the bank weighs every band alike.
        let norm = 2.0 / (high - low);
        for (bin, &freq) in fft_freqs.iter().enumerate() {
            let rising = (freq - low) / (centre - low);
            let falling = (high - freq) / (high - centre);
            bank[mel * bins + bin] = (rising.min(falling).max(0.0) * norm) as f32;
        }
    }
    bank
}

/// Slaney's mel scale: linear below 1 kHz (15 mels), logarithmic above.
fn hz_to_mel(hz: f64) -> f64 {
    if hz < 1000.0 {
        hz * 3.0 / 200.0
    } else {
        15.0 + (hz / 1000.0).ln() / log_step()
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    if mel < 15.0 {
        mel * 200.0 / 3.0
    } else {
        1000.0 * (log_step() * (mel - 15.0)).exp()
    }
}

/// The log-frequency step of one mel above 1 kHz in Slaney's scale: ln(6.4) / 27.
fn log_step() -> f64 {
    6.4f64.ln() / 27.0
}

/// Frames of silence after a window's last sound that the encoder still reads (3 s). With
/// half a second, a Librivox clip's last sentence was decoded again and again.
const TAIL_FRAMES: usize = 300;

/// The frames the encoder reads come in steps of this many (2 s).
const FRAME_STEP: usize = 200;

/// How many of the spectrogram's `m::N_FRAMES` frames the encoder reads for a window of
/// `samples` 16 kHz samples: the window's sound and at least [`TAIL_FRAMES`] of the silence
/// after it, rounded up to a step of [`FRAME_STEP`], at most all of them (whisper.cpp's
/// `audio_ctx`). The rest is padding, whose encoding costs time (attention grows with the
/// square of the frames) and adds little the decoder needs: the words of the evaluation's
/// Librivox clips and of the tests' spoken sentences are the same as with the whole window
/// (`docs/models-audio.md`).
pub fn frames_read(samples: usize) -> usize {
    let sound = samples.div_ceil(m::HOP_LENGTH);
    ((sound + TAIL_FRAMES).div_ceil(FRAME_STEP) * FRAME_STEP).min(m::N_FRAMES)
}

/// The log-mel spectrogram of one window of at most 30 s (padded with silence), as
/// `config.num_mel_bins` rows of `m::N_FRAMES` frames: candle-transformers' `pcm_to_mel`
/// (whisper.cpp's: periodic Hann window, power spectrum, log10 floored at 1e-10, clamped to
/// 8 below the maximum, scaled to (x + 4) / 4) with rustfft's FFT instead of candle's, which
/// recomputes its twiddle factors for every frame, and only over the frames the model reads.
pub fn spectrogram(config: &Config, filters: &[f32], window: &[f32]) -> Vec<f32> {
    let mels = config.num_mel_bins;
    let bins = m::N_FFT / 2 + 1;
    let hann: Vec<f32> = (0..m::N_FFT)
        .map(|i| 0.5 * (1.0 - (2.0 * std::f32::consts::PI * i as f32 / m::N_FFT as f32).cos()))
        .collect();
    // Each triangle's nonzero bins, so the filtering skips the zeros.
    let spans: Vec<(usize, usize)> = filters
        .chunks(bins)
        .map(|row| {
            let first = row.iter().position(|w| *w != 0.0).unwrap_or(0);
            let last = row.iter().rposition(|w| *w != 0.0).map_or(0, |i| i + 1);
            (first, last.max(first))
        })
        .collect();
    let fft = FftPlanner::<f32>::new().plan_fft_forward(m::N_FFT);
    let mut buffer = vec![Complex::default(); m::N_FFT];
    let mut scratch = vec![Complex::default(); fft.get_inplace_scratch_len()];
    let mut power = vec![0.0f32; bins];
    let silent = (1e-10f32).log10();
    let mut mel = vec![silent; mels * m::N_FRAMES];
    for frame in 0..m::N_FRAMES {
        let offset = frame * m::HOP_LENGTH;
        if offset >= window.len() {
            // Padding only: a zero spectrum, already the floor.
            break;
        }
        let samples = &window[offset..window.len().min(offset + m::N_FFT)];
        for (i, slot) in buffer.iter_mut().enumerate() {
            let sample = samples.get(i).copied().unwrap_or(0.0);
            *slot = Complex::new(hann[i] * sample, 0.0);
        }
        fft.process_with_scratch(&mut buffer, &mut scratch);
        // A real signal's spectrum is symmetric: the bins between 0 and Nyquist count twice.
        for (bin, slot) in power.iter_mut().enumerate() {
            let twice = if bin == 0 || bin == bins - 1 {
                1.0
            } else {
                2.0
            };
            *slot = buffer[bin].norm_sqr() * twice;
        }
        for (row, &(first, last)) in spans.iter().enumerate() {
            let weights = &filters[row * bins + first..row * bins + last];
            let sum: f32 = weights
                .iter()
                .zip(&power[first..last])
                .map(|(w, p)| w * p)
                .sum();
            mel[row * m::N_FRAMES + frame] = sum.max(1e-10).log10();
        }
    }
    let floor = mel.iter().copied().fold(f32::NEG_INFINITY, f32::max) - 8.0;
    for value in &mut mel {
        *value = value.max(floor) / 4.0 + 1.0;
    }
    mel
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoder_reads_the_sound_and_three_seconds_of_silence_in_steps_of_two_seconds() {
        assert_eq!(frames_read(0), 400);
        // 1 s of sound and 3 s of silence: two steps exactly; a sample more takes the next.
        assert_eq!(frames_read(16_000), 400);
        assert_eq!(frames_read(16_001), 600);
        // Past 25 s of sound: the whole window.
        assert_eq!(frames_read(25 * 16_000), 2_800);
        assert_eq!(frames_read(25 * 16_000 + 1), m::N_FRAMES);
        assert_eq!(frames_read(30 * 16_000), m::N_FRAMES);
    }

    /// Nonzero weights of OpenAI's bank (`FeatureExtractor(80).mel_filters` in faster-whisper,
    /// librosa's formula): (row, column, weight).
    const REFERENCE: [(usize, usize, f64); 10] = [
        (0, 1, 0.024_862_595),
        (1, 1, 0.001_990_822),
        (1, 2, 0.022_871_772),
        (20, 19, 0.010_972_2),
        (20, 20, 0.013_890_394),
        (40, 42, 0.005_411_105),
        (40, 43, 0.014_735_566),
        (40, 44, 0.006_518_19),
        (79, 186, 0.000_366_741_67),
        (79, 192, 0.003_164_711_6),
    ];

    #[test]
    fn the_filter_bank_matches_openais_80_by_201() {
        let bank = filters(80);

        assert_eq!(bank.len(), 80 * 201);
        for (row, column, weight) in REFERENCE {
            let got = f64::from(bank[row * 201 + column]);
            assert!(
                (got - weight).abs() < 1e-6,
                "[{row}, {column}]: {got} != {weight}"
            );
        }
        // Elsewhere in those rows the triangles are zero, as in the reference.
        assert_eq!(bank[..201].iter().filter(|w| **w > 0.0).count(), 1);
        assert_eq!(bank[79 * 201..].iter().filter(|w| **w > 0.0).count(), 14);
        let total: f32 = bank.iter().sum();
        assert!((total - 1.999_024).abs() < 1e-4, "sum {total}");
    }

    #[test]
    fn a_short_window_gives_a_full_30_second_spectrogram() {
        let config: Config = serde_json::from_value(serde_json::json!({
            "num_mel_bins": 80, "max_source_positions": 1500, "d_model": 384,
            "encoder_attention_heads": 6, "encoder_layers": 4, "vocab_size": 51864,
            "max_target_positions": 448, "decoder_attention_heads": 6, "decoder_layers": 4
        }))
        .unwrap();
        let tone: Vec<f32> = (0..16_000)
            .map(|i| (i as f32 * 2.0 * std::f32::consts::PI * 1000.0 / 16_000.0).sin())
            .collect();

        let mel = spectrogram(&config, &filters(80), &tone);

        assert_eq!(mel.len(), 80 * m::N_FRAMES);
        // The tone's second is loud in the 1 kHz bins and the padding is quiet.
        let loudest_bin = (0..80)
            .max_by(|a, b| mel[a * m::N_FRAMES + 50].total_cmp(&mel[b * m::N_FRAMES + 50]))
            .unwrap();
        assert!((24..=27).contains(&loudest_bin), "bin {loudest_bin}");
        assert!(mel[loudest_bin * m::N_FRAMES + 50] > mel[loudest_bin * m::N_FRAMES + 2000]);
    }
    #[test]
    fn the_spectrogram_matches_candles_pcm_to_mel() {
        let config: Config = serde_json::from_value(serde_json::json!({
            "num_mel_bins": 80, "max_source_positions": 1500, "d_model": 384,
            "encoder_attention_heads": 6, "encoder_layers": 4, "vocab_size": 51864,
            "max_target_positions": 448, "decoder_attention_heads": 6, "decoder_layers": 4
        }))
        .unwrap();
        let bank = filters(80);
        // 7.3 s of a chirp with a little deterministic noise: every bin sees something.
        let samples: Vec<f32> = (0..116_800)
            .map(|i| {
                let t = i as f32 / 16_000.0;
                let noise = ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 0.01;
                0.3 * (2.0 * std::f32::consts::PI * (200.0 + 400.0 * t) * t).sin() + noise
            })
            .collect();

        let ours = spectrogram(&config, &bank, &samples);

        let candles = m::audio::pcm_to_mel(&config, &samples, &bank);
        let frames = candles.len() / 80;
        // The two FFTs round differently: a little in the quietest bins, next to nothing on
        // average (the values span about 2).
        let mut total = 0.0f64;
        for row in 0..80 {
            for frame in 0..m::N_FRAMES {
                let (a, b) = (
                    ours[row * m::N_FRAMES + frame],
                    candles[row * frames + frame],
                );
                assert!((a - b).abs() < 1e-3, "[{row}, {frame}]: {a} != {b}");
                total += f64::from((a - b).abs());
            }
        }
        let mean = total / (80 * m::N_FRAMES) as f64;
        assert!(mean < 1e-5, "mean difference {mean}");
    }
}
