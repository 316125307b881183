//! A chat request as it is sent. One with an image or video is serialised with a placeholder
//! where the `data:` URL goes and sent as a stream: the JSON before it, the URL's head, the
//! base64 of the fetched bytes encoded chunk by chunk, the JSON after it, with its exact
//! `content-length`. The media is never held a second time (a 100 MB video would be a 133 MB
//! string, then a copy of it in the body), and each try builds the stream again from the same
//! shared bytes. The bytes sent are those of the request serialised with the URL in place.

use std::{convert::Infallible, iter, sync::Arc};

use bytes::Bytes;
use reqwest::header::CONTENT_LENGTH;

use super::media::DataUrl;

/// A serialised chat request, ready to send.
pub(super) enum ChatPayload {
    /// The JSON of a request without media.
    Json(Bytes),
    /// The JSON of a request with an image or video, split where its `data:` URL goes.
    WithMedia {
        /// The JSON up to the URL.
        prefix: Bytes,
        /// The URL's `data:<mime>;base64,` as it is written inside a JSON string.
        head: Bytes,
        /// Where the rest of the URL comes from.
        url: Arc<DataUrl>,
        /// The JSON after the URL.
        suffix: Bytes,
    },
}

impl ChatPayload {
    /// `json`, a request serialised with `data_url`'s placeholder in it where the URL goes;
    /// `None` when the placeholder is not there.
    pub(super) fn new(json: Vec<u8>, data_url: Option<&Arc<DataUrl>>) -> Option<Self> {
        let Some(url) = data_url else {
            return Some(Self::Json(json.into()));
        };
        let placeholder = url.placeholder().as_bytes();
        let at = json
            .windows(placeholder.len())
            .position(|window| window == placeholder)?;
        // The head escaped as it would be inside the whole URL's JSON string; base64 needs no
        // escaping, so the stream's bytes are those of the request with the URL in place.
        let head = serde_json::to_string(url.head()).ok()?;
        let head = head.strip_prefix('"')?.strip_suffix('"')?;
        let json = Bytes::from(json);
        Some(Self::WithMedia {
            prefix: json.slice(..at),
            head: Bytes::copy_from_slice(head.as_bytes()),
            url: Arc::clone(url),
            suffix: json.slice(at + placeholder.len()..),
        })
    }

    /// The request body and its `content-length`. A body with media is a stream encoding it
    /// from the shared bytes as it goes, so it is never held whole; the bytes sent are those
    /// of the request serialised with the URL in place.
    pub(super) fn attach_to(self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Self::Json(json) => request.body(json),
            with_media => {
                request
                    .header(CONTENT_LENGTH, with_media.len())
                    .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
                        with_media.chunks().map(Ok::<_, Infallible>),
                    )))
            }
        }
    }

    /// Its length in bytes.
    fn len(&self) -> u64 {
        match self {
            Self::Json(json) => json.len() as u64,
            Self::WithMedia {
                prefix,
                head,
                url,
                suffix,
            } => (prefix.len() + head.len() + suffix.len()) as u64 + url.encoded_len(),
        }
    }

    /// Its bytes in order, the media's base64 encoded only as each chunk is asked for.
    fn chunks(self) -> Box<dyn Iterator<Item = Bytes> + Send> {
        match self {
            Self::Json(json) => Box::new(iter::once(json)),
            Self::WithMedia {
                prefix,
                head,
                url,
                suffix,
            } => Box::new(
                [prefix, head]
                    .into_iter()
                    .chain(url.encoded_chunks())
                    .chain(iter::once(suffix)),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;
    use crate::classify::{
        openai::{
            prompt::{visual_messages, visual_schema},
            wire::{ChatRequest, Wire},
            VisualKind,
        },
        CustomCategory, Media, Policy,
    };

    fn visual_request(
        data_url: &str,
        url: Option<DataUrl>,
        policy: &Policy,
    ) -> ChatRequest<'static> {
        ChatRequest {
            model: "vision",
            messages: visual_messages(VisualKind::Image, data_url.to_owned(), policy),
            schema: visual_schema(policy),
            max_tokens: Some(300),
            data_url: url.map(Arc::new),
        }
    }

    #[test]
    fn a_streamed_body_is_the_request_serialised_with_the_data_url_in_place() {
        let policy = Policy {
            nsfw_check: true,
            custom: vec![CustomCategory {
                name: "spam".to_owned(),
                description: "Ads \"quoted\" data:image/png;base64, </script>".to_owned(),
                keywords: vec![],
            }],
            account_terms: vec![],
        };
        // Not a multiple of 3 nor of a chunk, and a declared type that needs JSON escaping.
        for (len, content_type) in [
            (200_003, "image/png"),
            (5, "image/x\"odd\\"),
            (0, "image/gif"),
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 256) as u8).collect();
            let media = Media {
                bytes: bytes.into(),
                content_type: Some(content_type.to_owned()),
            };
            let url = DataUrl::new(VisualKind::Image, &media);
            let whole = format!(
                "{}{}",
                url.head(),
                base64::engine::general_purpose::STANDARD.encode(&media.bytes)
            );
            let placeholder = url.placeholder().to_owned();
            let streamed = visual_request(&placeholder, Some(url), &policy);
            let before = visual_request(&whole, None, &policy);

            for wire in [Wire::JsonSchema, Wire::JsonObject] {
                let payload = streamed.body(wire).ok().unwrap();
                let length = payload.len();
                let sent: Vec<u8> = payload.chunks().flatten().collect();

                let Ok(ChatPayload::Json(expected)) = before.body(wire) else {
                    panic!("a request without media is sent whole");
                };
                assert_eq!(sent, expected, "{len} bytes of {content_type}");
                assert_eq!(
                    length,
                    expected.len() as u64,
                    "{len} bytes of {content_type}"
                );
            }
        }
    }
}
