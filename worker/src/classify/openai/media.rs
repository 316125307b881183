//! Media as the model server takes it: images and videos as `data:` URLs of the fetched bytes
//! (never the user's URL), encoded while the request is sent; audio as a named multipart file. The type is the one the media
//! server declared when it fits, else it is recognised from the first bytes.

use std::{collections::hash_map::RandomState, hash::BuildHasher};

use base64::Engine as _;
use bytes::Bytes;

use super::VisualKind;
use crate::classify::Media;

/// What a piece of media is for: the top-level type its MIME type must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Image,
    Video,
    Audio,
}

impl Family {
    fn accepts(self, mime: &str) -> bool {
        match self {
            Self::Image => mime.starts_with("image/"),
            Self::Video => mime.starts_with("video/"),
            // Audio is often served in a video container (mp4, webm).
            Self::Audio => mime.starts_with("audio/") || mime.starts_with("video/"),
        }
    }
}

/// Bytes of media base64-encoded per body chunk: a multiple of 3, so no chunk but the last is
/// padded and the chunks join into the base64 of the whole (64 KiB of text each).
const CHUNK_BYTES: usize = 3 * 16 * 1024;

/// The `data:` URL of an image or video, never built as one string: the request's JSON holds
/// [`DataUrl::placeholder`] where it goes, and the body is sent as the URL's head then the
/// base64 of the shared bytes, encoded chunk by chunk while it is sent.
pub(super) struct DataUrl {
    head: String,
    bytes: Bytes,
    placeholder: String,
}

impl DataUrl {
    /// The URL of `media` as `kind`.
    pub(super) fn new(kind: VisualKind, media: &Media) -> Self {
        let family = match kind {
            VisualKind::Image => Family::Image,
            VisualKind::Video => Family::Video,
        };
        // Random per request, so no other text in it (a custom category's description) can
        // be taken for the placeholder.
        let random = RandomState::new();
        Self {
            head: format!("data:{};base64,", mime_type(family, media)),
            bytes: media.bytes.clone(),
            placeholder: format!(
                "media-data-url-{:016x}{:016x}",
                random.hash_one(0u8),
                random.hash_one(1u8)
            ),
        }
    }

    /// What stands for the URL in the request's JSON: a string serialised as itself.
    pub(super) fn placeholder(&self) -> &str {
        &self.placeholder
    }

    /// `data:<mime>;base64,`.
    pub(super) fn head(&self) -> &str {
        &self.head
    }

    /// The length of the base64 of the bytes.
    pub(super) fn encoded_len(&self) -> u64 {
        self.bytes.len().div_ceil(3) as u64 * 4
    }

    /// The base64 of the bytes, in chunks encoded as they are asked for.
    pub(super) fn encoded_chunks(&self) -> impl Iterator<Item = Bytes> + Send + 'static {
        let bytes = self.bytes.clone();
        (0..bytes.len()).step_by(CHUNK_BYTES).map(move |start| {
            let end = bytes.len().min(start + CHUNK_BYTES);
            Bytes::from(base64::engine::general_purpose::STANDARD.encode(&bytes[start..end]))
        })
    }
}

/// The file name and MIME type of an audio upload. Servers such as OpenAI's tell the format
/// by the file name's extension.
pub(super) fn audio_file(media: &Media) -> (String, String) {
    let mime = mime_type(Family::Audio, media);
    let extension = match mime.as_str() {
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => "wav",
        "audio/ogg" | "audio/opus" | "video/ogg" => "ogg",
        "audio/flac" | "audio/x-flac" => "flac",
        "audio/mp4" | "audio/m4a" | "audio/x-m4a" | "audio/aac" => "m4a",
        "video/mp4" => "mp4",
        "audio/webm" | "video/webm" => "webm",
        _ => "bin",
    };
    (format!("audio.{extension}"), mime)
}

/// The declared type when it fits `family`, else the type the bytes show, else the declared
/// type anyway, else `application/octet-stream`.
fn mime_type(family: Family, media: &Media) -> String {
    let declared = media
        .content_type
        .as_deref()
        .map(|mime| mime.trim().to_ascii_lowercase());
    if let Some(mime) = declared.as_deref().filter(|mime| family.accepts(mime)) {
        return match mime {
            "image/jpg" => "image/jpeg".to_owned(),
            other => other.to_owned(),
        };
    }
    sniff(family, &media.bytes)
        .map(str::to_owned)
        .or(declared)
        .unwrap_or_else(|| "application/octet-stream".to_owned())
}

/// Recognises common image, video and audio formats by their first bytes.
fn sniff(family: Family, bytes: &[u8]) -> Option<&'static str> {
    let at = |offset: usize, magic: &[u8]| bytes.get(offset..offset + magic.len()) == Some(magic);
    let container = |video: &'static str, audio: &'static str| match family {
        Family::Audio => audio,
        Family::Image | Family::Video => video,
    };
    if at(0, b"\xFF\xD8\xFF") {
        Some("image/jpeg")
    } else if at(0, b"\x89PNG\r\n\x1A\n") {
        Some("image/png")
    } else if at(0, b"GIF87a") || at(0, b"GIF89a") {
        Some("image/gif")
    } else if at(0, b"RIFF") && at(8, b"WEBP") {
        Some("image/webp")
    } else if at(0, b"RIFF") && at(8, b"WAVE") {
        Some("audio/wav")
    } else if at(0, b"RIFF") && at(8, b"AVI ") {
        Some("video/x-msvideo")
    } else if at(4, b"ftyp") {
        Some(if at(8, b"avif") || at(8, b"avis") {
            "image/avif"
        } else if at(8, b"heic") || at(8, b"heix") || at(8, b"mif1") {
            "image/heic"
        } else if at(8, b"qt  ") {
            "video/quicktime"
        } else if at(8, b"M4A ") {
            "audio/mp4"
        } else {
            container("video/mp4", "audio/mp4")
        })
    } else if at(0, b"\x1A\x45\xDF\xA3") {
        Some(container("video/webm", "audio/webm"))
    } else if at(0, b"OggS") {
        Some(container("video/ogg", "audio/ogg"))
    } else if at(0, b"fLaC") {
        Some("audio/flac")
    } else if at(0, b"ID3") || (bytes.len() > 1 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0) {
        Some("audio/mpeg")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(bytes: &[u8], content_type: Option<&str>) -> Media {
        Media {
            bytes: Bytes::copy_from_slice(bytes),
            content_type: content_type.map(str::to_owned),
        }
    }

    /// The whole URL, as the body carries it.
    fn data_url(kind: VisualKind, media: &Media) -> String {
        let url = DataUrl::new(kind, media);
        let mut text = url.head().to_owned();
        for chunk in url.encoded_chunks() {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        text
    }

    const PNG: &[u8] = b"\x89PNG\r\n\x1A\n\0\0\0\rIHDR";
    const MP4: &[u8] = b"\0\0\0\x18ftypisom\0\0\x02\0";

    #[test]
    fn an_image_data_url_carries_the_declared_type_and_the_bytes() {
        let url = data_url(VisualKind::Image, &media(b"abc", Some("image/png")));
        assert_eq!(url, "data:image/png;base64,YWJj");
    }

    #[test]
    fn the_chunks_join_into_the_base64_of_the_whole() {
        for len in [
            0,
            1,
            2,
            3,
            CHUNK_BYTES - 1,
            CHUNK_BYTES,
            2 * CHUNK_BYTES + 1,
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let url = DataUrl::new(VisualKind::Video, &media(&bytes, Some("video/mp4")));

            let encoded: Vec<u8> = url.encoded_chunks().flatten().collect();

            let whole = base64::engine::general_purpose::STANDARD.encode(&bytes);
            assert_eq!(encoded, whole.as_bytes(), "{len} bytes");
            assert_eq!(url.encoded_len(), whole.len() as u64, "{len} bytes");
        }
    }

    #[test]
    fn each_url_has_its_own_placeholder() {
        let media = media(b"abc", Some("image/png"));

        let (one, other) = (
            DataUrl::new(VisualKind::Image, &media),
            DataUrl::new(VisualKind::Image, &media),
        );

        assert_ne!(one.placeholder(), other.placeholder());
    }

    #[test]
    fn an_unfitting_or_missing_type_is_recognised_from_the_bytes() {
        let url = data_url(
            VisualKind::Image,
            &media(PNG, Some("application/octet-stream")),
        );
        assert!(url.starts_with("data:image/png;base64,"), "{url}");
        let url = data_url(VisualKind::Video, &media(MP4, None));
        assert!(url.starts_with("data:video/mp4;base64,"), "{url}");
        let url = data_url(
            VisualKind::Image,
            &media(b"\xFF\xD8\xFF\xE0", Some("text/plain")),
        );
        assert!(url.starts_with("data:image/jpeg;base64,"), "{url}");
    }

    #[test]
    fn unknown_bytes_keep_the_declared_type_or_become_octet_stream() {
        let url = data_url(VisualKind::Image, &media(b"????", Some("text/plain")));
        assert!(url.starts_with("data:text/plain;base64,"), "{url}");
        let url = data_url(VisualKind::Video, &media(b"????", None));
        assert!(
            url.starts_with("data:application/octet-stream;base64,"),
            "{url}"
        );
    }

    #[test]
    fn audio_files_are_named_by_their_format() {
        assert_eq!(
            audio_file(&media(b"ID3\x04", None)),
            ("audio.mp3".to_owned(), "audio/mpeg".to_owned())
        );
        assert_eq!(
            audio_file(&media(b"RIFF\0\0\0\0WAVEfmt ", Some("binary/octet-stream"))),
            ("audio.wav".to_owned(), "audio/wav".to_owned())
        );
        assert_eq!(
            audio_file(&media(MP4, None)),
            ("audio.m4a".to_owned(), "audio/mp4".to_owned())
        );
        assert_eq!(
            audio_file(&media(b"OggS", Some("audio/ogg"))),
            ("audio.ogg".to_owned(), "audio/ogg".to_owned())
        );
        assert_eq!(
            audio_file(&media(b"????", None)),
            (
                "audio.bin".to_owned(),
                "application/octet-stream".to_owned()
            )
        );
    }
}
