//! Whisper's input: the 80-bin log-mel spectrogram of a 30 s window (400-sample FFT, hop 160),
//! with the mel filter bank computed here as librosa does it (Slaney's mel scale and area
//! normalisation), the bank OpenAI's Whisper ships.

use candle_transformers::models::whisper::{self as m, Config};

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

/// The log-mel spectrogram of one window of at most 30 s (padded with silence), as
/// `config.num_mel_bins` rows of `m::N_FRAMES` frames.
pub fn spectrogram(config: &Config, filters: &[f32], window: &[f32]) -> Vec<f32> {
    // candle pads with at least 15 s of silence and rounds up to a multiple of 15 s, so there
    // are at least N_FRAMES frames; the rows are that long.
    let mel = m::audio::pcm_to_mel(config, window, filters);
    let frames = mel.len() / config.num_mel_bins;
    mel.chunks(frames)
        .flat_map(|row| row[..m::N_FRAMES.min(frames)].iter().copied())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
