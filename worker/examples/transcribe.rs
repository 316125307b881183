//! Transcribes audio files with the worker's built-in Whisper, for `scripts/eval.d/audio.sh`
//! (word error rate) and `scripts/bench.d/models-audio.sh` (speed):
//!
//!     cargo run --release -p moderation-worker --example transcribe -- MODEL_DIR FILE...
//!
//! The model is `APP_SPEECH_MODEL`'s (`base`, the default, or `tiny.en`; `WHISPER_PRODUCTS`:
//! `common/speech.rs`). Prints one line a
//! file, `FILE<TAB>SECONDS_OF_AUDIO<TAB>SECONDS_TAKEN<TAB>LANGUAGE<TAB>TRANSCRIPT`, then
//! the process's peak and final resident memory on standard error. A development tool: the worker itself
//! never prints a transcript.

#[path = "common/speech.rs"]
mod speech;

use std::{path::PathBuf, time::Instant};

use moderation_worker::probe;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or_else(|| anyhow::anyhow!("usage: transcribe MODEL_DIR FILE..."))?,
    );
    let (whisper, _) = speech::load(&dir)?;
    for file in args {
        let bytes = bytes::Bytes::from(std::fs::read(&file)?);
        let length = probe::audio_duration(bytes.clone())?;
        let started = Instant::now();
        let transcript = whisper.transcribe(bytes)?;
        println!(
            "{}\t{:.2}\t{:.3}\t{}\t{}",
            PathBuf::from(file).display(),
            length.as_secs_f64(),
            started.elapsed().as_secs_f64(),
            transcript.language().unwrap_or("-"),
            transcript.text()
        );
    }
    // Linux reports the peak and current resident sets as `VmHWM:   123456 kB`, `VmRSS: ...`.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map_or_else(String::new, |value| value.trim().to_owned())
    };
    eprintln!(
        "peak {}, after transcribing {}",
        field("VmHWM:"),
        field("VmRSS:")
    );
    Ok(())
}
