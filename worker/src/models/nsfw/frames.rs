//! Frames sampled across a whole video with ffmpeg, for the NSFW model (contract 10): at most
//! [`MAX_FRAMES`], evenly spaced over the duration ffprobe reads from the container (the first
//! ones when it declares none), as PNG images in memory.
//!
//! The video goes to ffmpeg through a temporary file (an MP4 whose index is at its end cannot
//! be read from a pipe), removed whatever happens. ffmpeg and ffprobe run without a shell, with
//! a time limit, killed when it passes; their output is bounded. Frames larger than
//! [`MAX_SIDE`] on a side are shrunk by ffmpeg first, which bounds memory at 64 frames.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::{io::AsyncReadExt, process::Command};

/// The most frames sampled from one video.
pub const MAX_FRAMES: u32 = 64;
/// Frames wider or taller than this are shrunk (keeping their aspect ratio) before scoring.
pub const MAX_SIDE: u32 = 1024;
/// The most PNG bytes read from ffmpeg (64 frames of 1024x1024 stay below it).
const MAX_OUTPUT: u64 = 256 * 1024 * 1024;
/// The most bytes of ffmpeg's error output kept for the log.
const MAX_STDERR: u64 = 4096;
/// How long ffprobe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long ffmpeg may take to decode and sample the whole video.
const DECODE_TIMEOUT: Duration = Duration::from_secs(180);

/// Why no frames came out of a video.
#[derive(Debug, thiserror::Error)]
pub enum FramesError {
    /// The video has no video stream, or none ffmpeg could decode.
    #[error("the video has no decodable frames ({0})")]
    NoFrames(String),
    /// Decoding took longer than its limit.
    #[error("ffmpeg took longer than {0:?}")]
    Timeout(Duration),
    /// ffmpeg wrote more than the output limit.
    #[error("the sampled frames exceed {MAX_OUTPUT} bytes")]
    TooLarge,
    /// ffmpeg or ffprobe could not be run, or the temporary file not written.
    #[error("running ffmpeg failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Up to [`MAX_FRAMES`] frames of the video in `bytes`, evenly spaced, each a PNG image.
pub async fn sample(bytes: &[u8]) -> Result<Vec<Vec<u8>>, FramesError> {
    let file = TempFile::write(bytes).await?;
    let duration = probe_duration(file.path()).await?;
    let output = run_ffmpeg(file.path(), duration).await?;
    let frames = split_png_stream(&output);
    if frames.is_empty() {
        return Err(FramesError::NoFrames("ffmpeg wrote no frames".to_owned()));
    }
    Ok(frames)
}

/// The duration in seconds the container declares, if any.
async fn probe_duration(path: &Path) -> Result<Option<f64>, FramesError> {
    let mut command = Command::new("ffprobe");
    command.args(["-v", "error", "-show_entries", "format=duration"]);
    command.args(["-of", "default=noprint_wrappers=1:nokey=1"]);
    command.arg(path);
    let (stdout, _) = run(command, 4096, PROBE_TIMEOUT).await?;
    Ok(String::from_utf8_lossy(&stdout)
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds > 0.0))
}

/// ffmpeg's PNG frames of the first video stream, one every duration / 64 seconds.
async fn run_ffmpeg(path: &Path, duration: Option<f64>) -> Result<Vec<u8>, FramesError> {
    let shrink = format!(
        "scale='min(iw,{MAX_SIDE})':'min(ih,{MAX_SIDE})':force_original_aspect_ratio=decrease"
    );
    let filter = match duration {
        Some(seconds) => format!("fps={:.9},{shrink}", f64::from(MAX_FRAMES) / seconds),
        None => shrink,
    };
    let mut command = Command::new("ffmpeg");
    command.args(["-nostdin", "-v", "error", "-i"]);
    command.arg(path);
    command.args(["-map", "0:v:0", "-an", "-sn", "-dn", "-vf", &filter]);
    command.args(["-frames:v", &MAX_FRAMES.to_string()]);
    command.args(["-pix_fmt", "rgb24", "-c:v", "png", "-f", "image2pipe", "-"]);
    let (stdout, stderr) = run(command, MAX_OUTPUT, DECODE_TIMEOUT).await?;
    if stdout.is_empty() {
        let message = String::from_utf8_lossy(&stderr).trim().to_owned();
        return Err(FramesError::NoFrames(message));
    }
    Ok(stdout)
}

/// Runs `command` to its end within `timeout`, returning its output (at most `max_stdout`
/// bytes, else [`FramesError::TooLarge`]) and the start of its error output. The exit status
/// is not an error by itself: a damaged video may still give frames.
async fn run(
    mut command: Command,
    max_stdout: u64,
    timeout: Duration,
) -> Result<(Vec<u8>, Vec<u8>), FramesError> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(FramesError::Io(std::io::Error::other("no pipes to ffmpeg")));
    };
    let work = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut stdout, mut stderr) = (stdout.take(max_stdout + 1), stderr.take(MAX_STDERR));
        let (read_out, read_err) =
            tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err),);
        read_out?;
        read_err?;
        if out.len() as u64 > max_stdout {
            return Err(FramesError::TooLarge);
        }
        child.wait().await?;
        Ok((out, err))
    };
    // On a timeout or error the child is dropped, which kills it.
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| FramesError::Timeout(timeout))?
}

/// The PNG images of a stream of them, one after the other (a truncated last one is dropped).
fn split_png_stream(mut stream: &[u8]) -> Vec<Vec<u8>> {
    const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";
    let mut frames = Vec::new();
    while stream.starts_with(SIGNATURE) {
        let mut end = SIGNATURE.len();
        loop {
            let Some(header) = stream.get(end..end + 8) else {
                return frames;
            };
            let length = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
            // Length, type, data, CRC.
            end += 12 + length as usize;
            if end > stream.len() {
                return frames;
            }
            if &header[4..8] == b"IEND" {
                break;
            }
        }
        frames.push(stream[..end].to_vec());
        stream = &stream[end..];
    }
    frames
}

/// A temporary file holding the video, removed when dropped.
struct TempFile {
    path: PathBuf,
}

impl TempFile {
    async fn write(bytes: &[u8]) -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "moderation-video-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        // From here on the file exists: the guard removes it even if writing fails.
        let guard = Self { path };
        tokio::io::AsyncWriteExt::write_all(&mut file, bytes).await?;
        tokio::io::AsyncWriteExt::flush(&mut file).await?;
        Ok(guard)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_file(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %err, "Could not remove a temporary video file");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let image = image::RgbImage::from_pixel(width, height, image::Rgb([1, 2, 3]));
        let mut out = std::io::Cursor::new(Vec::new());
        image.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn a_png_stream_splits_into_its_images() {
        let (one, two) = (png(3, 2), png(5, 7));
        let stream = [one.clone(), two.clone()].concat();
        assert_eq!(split_png_stream(&stream), vec![one, two]);
    }

    #[test]
    fn a_truncated_last_image_is_dropped() {
        let (one, two) = (png(3, 2), png(5, 7));
        let stream = [one.clone(), two[..two.len() - 5].to_vec()].concat();
        assert_eq!(split_png_stream(&stream), vec![one]);
    }

    #[test]
    fn a_stream_that_is_not_png_gives_no_frames() {
        assert!(split_png_stream(b"not a png at all").is_empty());
    }

    #[tokio::test]
    async fn the_temporary_file_is_removed_when_dropped() {
        let file = TempFile::write(b"video").await.unwrap();
        let path = file.path().to_path_buf();
        assert_eq!(std::fs::read(&path).unwrap(), b"video");
        drop(file);
        assert!(!path.exists());
    }
}
