//! How long an audio clip plays, read from its container (symphonia), so clips over the spec's
//! 30 minutes fail before any transcription.
//!
//! Formats: WAV, MP3, Ogg (Vorbis), FLAC, MP4/M4A (AAC) and Matroska/WebM. The length is the
//! longer of what the container declares and where its packets end (walked without decoding):
//! a declared length is the uploader's claim, and for an MP3 without a Xing header it is only
//! an estimate from the first frames. The walk stops once it is past [`MAX_AUDIO`], and a file
//! of more than [`MAX_PACKETS`] packets is refused as unsupported.
//!
//! Symphonia reports every bad frame header it skips as a `log` warning (one per four bytes of
//! crafted junk); `shared::telemetry` keeps those out of the log, and a refusal here is logged
//! once, as the job's failure.

use std::{io::Cursor, time::Duration};

use bytes::Bytes;
use moderation_shared::domain::FailureCode;
use symphonia::core::{
    codecs::CodecParameters,
    errors::Error as SymphoniaError,
    formats::{FormatOptions, FormatReader},
    io::MediaSourceStream,
    meta::MetadataOptions,
    probe::Hint,
};

use crate::failure::Failure;

/// The longest clip classified: 30 minutes (exactly 30:00 passes).
pub const MAX_AUDIO: Duration = Duration::from_secs(30 * 60);

/// The most packets walked: a file with more is refused as unsupported. Encoders stay far
/// below it for 30 minutes (about 70,000 MP3 frames; 720,000 Opus packets at the shortest
/// 2.5 ms), so only a file of tiny crafted packets reaches it.
pub const MAX_PACKETS: u64 = 2_000_000;

/// The length of the audio in `bytes`.
pub fn audio_duration(bytes: Bytes) -> Result<Duration, Failure> {
    duration_within(bytes, MAX_PACKETS)
}

/// [`audio_duration`], refusing a file of more than `max_packets` packets.
fn duration_within(bytes: Bytes, max_packets: u64) -> Result<Duration, Failure> {
    let mut format = open(bytes)?;
    let track = format.default_track().ok_or_else(unsupported)?;
    let params = track.codec_params.clone();
    let track_id = track.id;
    let walked = walked(format.as_mut(), track_id, &params, max_packets)?;
    match (declared(&params), walked) {
        (Some(declared), Some(walked)) => Ok(declared.max(walked)),
        (one, other) => one.or(other).ok_or_else(unsupported),
    }
}

/// The container of the audio in `bytes`, its format guessed from its content.
pub fn open(bytes: Bytes) -> Result<Box<dyn FormatReader>, Failure> {
    let stream = MediaSourceStream::new(Box::new(Cursor::new(bytes)), Default::default());
    let probed = symphonia::default::get_probe()
        .format(
            &Hint::new(),
            stream,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(|_| unsupported())?;
    Ok(probed.format)
}

/// The failure of audio that cannot be read.
pub fn unsupported() -> Failure {
    Failure::permanent(
        FailureCode::MediaUnsupported,
        "The audio format is not supported or the file is corrupt.",
    )
}

/// The length the container declares.
fn declared(params: &CodecParameters) -> Option<Duration> {
    let frames = params.n_frames?;
    if let Some(base) = params.time_base {
        let time = base.calc_time(frames);
        return Some(Duration::from_secs(time.seconds) + Duration::from_secs_f64(time.frac));
    }
    let rate = u64::from(params.sample_rate?);
    (rate > 0).then(|| Duration::from_secs_f64(frames as f64 / rate as f64))
}

/// The end of the last packet of `track`, walking the packets without decoding them until
/// the end is past [`MAX_AUDIO`]; `None` when it cannot be told, an error past `max_packets`
/// packets.
fn walked(
    format: &mut dyn FormatReader,
    track: u32,
    params: &CodecParameters,
    max_packets: u64,
) -> Result<Option<Duration>, Failure> {
    let mut end: Option<Duration> = None;
    let mut packets: u64 = 0;
    loop {
        match format.next_packet() {
            Ok(packet) => {
                packets += 1;
                if packets > max_packets {
                    return Err(unsupported());
                }
                if packet.track_id() != track {
                    continue;
                }
                let Some(this) = timestamp(params, packet.ts() + packet.dur()) else {
                    return Ok(None);
                };
                let later = end.map_or(this, |end| end.max(this));
                end = Some(later);
                if later > MAX_AUDIO {
                    break;
                }
            }
            Err(SymphoniaError::IoError(_)) => break,
            Err(_) => return Ok(None),
        }
    }
    Ok(end)
}

/// The time of `ts` in the track's time base (or its sample rate).
fn timestamp(params: &CodecParameters, ts: u64) -> Option<Duration> {
    match (params.time_base, params.sample_rate) {
        (Some(base), _) => {
            let time = base.calc_time(ts);
            Some(Duration::from_secs(time.seconds) + Duration::from_secs_f64(time.frac))
        }
        (None, Some(rate)) if rate > 0 => {
            Some(Duration::from_secs_f64(ts as f64 / f64::from(rate)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `frames` MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz, 417 bytes, 1152 samples each)
    /// of silence-shaped zeros: enough to demux, never decoded.
    fn mp3(frames: usize) -> Bytes {
        let mut frame = vec![0u8; 417];
        frame[..4].copy_from_slice(&[0xFF, 0xFB, 0x90, 0x44]);
        frame.repeat(frames).into()
    }

    #[test]
    fn a_file_of_exactly_max_packets_is_walked_and_one_more_is_refused() {
        let at = duration_within(mp3(50), 50).unwrap();
        let over = duration_within(mp3(51), 50).unwrap_err();

        assert_eq!(at, Duration::from_secs_f64(50.0 * 1152.0 / 44100.0));
        assert_eq!(
            (over.code.as_str(), over.retryable),
            ("MEDIA_UNSUPPORTED", false)
        );
    }

    #[test]
    fn the_walk_stops_past_max_audio_before_the_packet_limit() {
        // 30 minutes are 68,907 frames of 1152 samples at 44.1 kHz; the walk stops at the
        // first frame past them, so a packet limit just above that is never reached.
        let frames = (MAX_AUDIO.as_secs() * 44_100).div_ceil(1152) as usize + 1;
        let length = duration_within(mp3(frames + 100), frames as u64).unwrap();

        assert!(length > MAX_AUDIO);
    }
}
