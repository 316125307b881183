//! Audio to what Whisper hears: decoded with symphonia (the formats of [`crate::probe`]), mixed
//! to mono, resampled to 16 kHz and cut into windows of at most 30 s, handed over one at a
//! time so memory stays at one window whatever the clip's length. The probe's limits hold: at
//! most [`probe::MAX_AUDIO`] of sound and [`probe::MAX_PACKETS`] packets.

use bytes::Bytes;
use symphonia::core::{
    audio::SampleBuffer, codecs::DecoderOptions, errors::Error as SymphoniaError,
};

use crate::{
    failure::Failure,
    probe::{self, unsupported},
};

/// Whisper's sample rate.
pub const SAMPLE_RATE: u32 = 16_000;

/// The samples of one window: 30 s at 16 kHz.
pub const WINDOW: usize = 30 * SAMPLE_RATE as usize;

/// Decodes `bytes` and calls `on_window` with each window of 16 kHz mono samples, in order:
/// full windows of [`WINDOW`] samples, then the rest (when there is any).
pub fn windows(
    bytes: Bytes,
    mut on_window: impl FnMut(&[f32]) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut format = probe::open(bytes)?;
    let track = format.default_track().ok_or_else(unsupported)?;
    let track_id = track.id;
    let mut decoder = symphonia::default::get_codecs()
        .make(&track.codec_params, &DecoderOptions::default())
        .map_err(|_| unsupported())?;
    let max_samples = probe::MAX_AUDIO.as_secs() as usize * SAMPLE_RATE as usize;
    let mut resampler: Option<Resampler> = None;
    let mut window: Vec<f32> = Vec::with_capacity(WINDOW);
    let mut emitted = 0usize;
    let mut packets = 0u64;
    let mut mono = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(packet) => packet,
            Err(SymphoniaError::IoError(_)) => break,
            Err(_) => return Err(unsupported()),
        };
        packets += 1;
        if packets > probe::MAX_PACKETS {
            return Err(unsupported());
        }
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(decoded) => decoded,
            // A damaged frame is skipped, as players do.
            Err(SymphoniaError::DecodeError(_)) => continue,
            Err(_) => return Err(unsupported()),
        };
        let spec = *decoded.spec();
        let channels = spec.channels.count().max(1);
        let resampler = match &mut resampler {
            Some(resampler) if resampler.from == spec.rate => resampler,
            Some(_) => return Err(unsupported()),
            None => resampler.insert(Resampler::new(spec.rate, SAMPLE_RATE)?),
        };
        let mut samples = SampleBuffer::<f32>::new(decoded.capacity() as u64, spec);
        samples.copy_interleaved_ref(decoded);
        mono.clear();
        mono.extend(
            samples
                .samples()
                .chunks(channels)
                .map(|frame| frame.iter().sum::<f32>() / channels as f32),
        );
        let mut resampled = Vec::new();
        resampler.push(&mono, &mut resampled);
        for sample in resampled {
            if emitted >= max_samples {
                break;
            }
            window.push(sample);
            emitted += 1;
            if window.len() == WINDOW {
                on_window(&window)?;
                window.clear();
            }
        }
        if emitted >= max_samples {
            break;
        }
    }
    let Some(mut resampler) = resampler else {
        return Err(unsupported());
    };
    let mut tail = Vec::new();
    resampler.finish(&mut tail);
    for sample in tail.into_iter().take(max_samples - emitted) {
        window.push(sample);
        if window.len() == WINDOW {
            on_window(&window)?;
            window.clear();
        }
    }
    if !window.is_empty() {
        on_window(&window)?;
    }
    Ok(())
}

/// Zero crossings of the sinc on each side of an output sample: a sharp low-pass (about 1 %
/// transition band) at a cost of 2 x 16 / ratio multiplications a sample.
const ZERO_CROSSINGS: f64 = 16.0;

/// A streaming band-limited resampler (Hann-windowed sinc): the input comes in pieces, the
/// output follows with a delay of half the filter.
#[derive(Debug)]
pub struct Resampler {
    from: u32,
    to: u32,
    /// The cut-off as a fraction of the input's Nyquist frequency (1 when upsampling).
    cutoff: f64,
    /// The filter's half-width in input samples.
    half: usize,
    /// Input samples kept, the first being input sample number `base`.
    input: Vec<f32>,
    base: usize,
    /// The number of the next output sample.
    next: usize,
}

impl Resampler {
    /// A resampler from `from` Hz to `to` Hz; a rate of 0 is an unsupported file.
    pub fn new(from: u32, to: u32) -> Result<Self, Failure> {
        if from == 0 || to == 0 {
            return Err(unsupported());
        }
        let cutoff = (f64::from(to) / f64::from(from)).min(1.0);
        Ok(Self {
            from,
            to,
            cutoff,
            half: (ZERO_CROSSINGS / cutoff).ceil() as usize,
            input: Vec::new(),
            base: 0,
            next: 0,
        })
    }

    /// Takes `samples` and appends to `out` every output sample they complete.
    pub fn push(&mut self, samples: &[f32], out: &mut Vec<f32>) {
        self.input.extend_from_slice(samples);
        self.drain(out, false);
    }

    /// Appends the last output samples, as if the input ended in silence.
    pub fn finish(&mut self, out: &mut Vec<f32>) {
        self.drain(out, true);
    }

    fn drain(&mut self, out: &mut Vec<f32>, end: bool) {
        let total = self.base + self.input.len();
        if self.from == self.to {
            out.extend_from_slice(&self.input);
            self.base = total;
            self.input.clear();
            return;
        }
        let step = f64::from(self.from) / f64::from(self.to);
        loop {
            let centre = self.next as f64 * step;
            if end {
                if centre >= total as f64 {
                    break;
                }
            } else if centre.floor() as usize + self.half >= total {
                break;
            }
            out.push(self.sample_at(centre));
            self.next += 1;
        }
        // Keep what the next output sample's filter still reaches.
        let keep_from = ((self.next as f64 * step).floor() as usize)
            .saturating_sub(self.half)
            .max(self.base);
        self.input.drain(..keep_from - self.base);
        self.base = keep_from;
    }

    /// The filtered input at the (fractional) input position `centre`.
    fn sample_at(&self, centre: f64) -> f32 {
        let first = (centre.floor() as usize + 1)
            .saturating_sub(self.half)
            .max(self.base);
        let last = (centre.floor() as usize + self.half).min(self.base + self.input.len() - 1);
        let mut sum = 0.0f64;
        for index in first..=last {
            let t = index as f64 - centre;
            sum += f64::from(self.input[index - self.base]) * self.kernel(t);
        }
        sum as f32
    }

    fn kernel(&self, t: f64) -> f64 {
        let half = self.half as f64;
        if t.abs() >= half {
            return 0.0;
        }
        let x = self.cutoff * t;
        let sinc = if x == 0.0 {
            1.0
        } else {
            (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x)
        };
        let window = 0.5 * (1.0 + (std::f64::consts::PI * t / half).cos());
        self.cutoff * sinc * window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, hz: f64, seconds: f64) -> Vec<f32> {
        (0..(f64::from(rate) * seconds) as usize)
            .map(|i| (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin() as f32)
            .collect()
    }

    fn resample_in_pieces(samples: &[f32], from: u32, piece: usize) -> Vec<f32> {
        let mut resampler = Resampler::new(from, SAMPLE_RATE).unwrap();
        let mut out = Vec::new();
        for chunk in samples.chunks(piece) {
            resampler.push(chunk, &mut out);
        }
        resampler.finish(&mut out);
        out
    }

    /// A 16-bit mono WAV of `samples` at `rate`.
    fn wav(samples: &[f32], rate: u32) -> Bytes {
        let data: Vec<u8> = samples
            .iter()
            .flat_map(|s| ((s * 32767.0) as i16).to_le_bytes())
            .collect();
        let mut out = Vec::new();
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
        out.extend_from_slice(b"WAVEfmt ");
        out.extend_from_slice(&16u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&rate.to_le_bytes());
        out.extend_from_slice(&(rate * 2).to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(b"data");
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(&data);
        out.into()
    }

    #[test]
    fn resampling_48_khz_to_16_khz_keeps_a_tone_and_the_length() {
        let input = tone(48_000, 440.0, 1.0);
        let out = resample_in_pieces(&input, 48_000, 1000);
        let expected = tone(SAMPLE_RATE, 440.0, 1.0);

        assert_eq!(out.len(), expected.len());
        // Away from the edges (where the filter meets the silence around the clip) the tone
        // comes through unchanged.
        let worst = out[500..15_500]
            .iter()
            .zip(&expected[500..15_500])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 0.01, "worst difference {worst}");
    }

    #[test]
    fn resampling_removes_what_16_khz_cannot_carry() {
        // 12 kHz is above the 8 kHz Nyquist frequency of the output: it must not fold back.
        let out = resample_in_pieces(&tone(48_000, 12_000.0, 1.0), 48_000, 777);

        let loudest = out[500..15_500].iter().map(|s| s.abs()).fold(0.0, f32::max);
        assert!(loudest < 0.01, "aliased amplitude {loudest}");
    }

    #[test]
    fn the_pieces_the_input_comes_in_do_not_change_the_output() {
        let input = tone(44_100, 300.0, 0.5);

        assert_eq!(
            resample_in_pieces(&input, 44_100, 1),
            resample_in_pieces(&input, 44_100, 100_000)
        );
    }

    #[test]
    fn a_clip_of_65_seconds_comes_in_two_full_windows_and_a_rest() {
        let mut lengths = Vec::new();

        windows(wav(&vec![0.1; 65 * 8_000], 8_000), |window| {
            lengths.push(window.len());
            Ok(())
        })
        .unwrap();

        assert_eq!(lengths, [WINDOW, WINDOW, 5 * SAMPLE_RATE as usize]);
    }

    #[test]
    fn bytes_that_are_not_audio_are_unsupported() {
        let err = windows(Bytes::from_static(b"not audio at all"), |_| Ok(())).unwrap_err();

        assert_eq!(err.code.as_str(), "MEDIA_UNSUPPORTED");
    }
}
