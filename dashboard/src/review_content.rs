//! What a job under review holds, as the review page shows it: a text, a chat's messages, or
//! its media URL shown as an image, a video or an audio player (never an audio transcript,
//! which is not stored). A leaf: it imports nothing of the crate.

use moderation_shared::{
    domain::{ChatMessage, Modality},
    url_guard::{self, UrlUse},
};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRow {
    /// `user`, `assistant` or `system`.
    pub role: &'static str,
    /// What it says.
    pub content: String,
}

/// A job's media, shown from its own URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// `image`, `video` or `audio`: the element that shows it.
    pub kind: &'static str,
    /// The URL.
    pub url: String,
    /// The URL's origin (`https://media.example`), which the page's policy allows for images
    /// and media.
    pub origin: String,
}

impl Media {
    /// Whether it is shown blurred until revealed (images and video; audio has no picture).
    pub fn is_visual(&self) -> bool {
        self.kind != "audio"
    }
}

/// What the job holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// A prompt.
    Text(String),
    /// A chat's messages.
    Chat(Vec<MessageRow>),
    /// An image, video or audio.
    Media(Media),
    /// A media URL that cannot be shown (not http or https): the URL as text.
    Link(String),
    /// Nothing: the content was erased (past its retention, or on request).
    Erased,
}

impl Content {
    /// The content of a job of type `kind` holding `text` (the prompt, a chat's lines or the
    /// media URL; `None` once erased) and a chat's `messages`.
    pub fn new(kind: &str, text: Option<String>, messages: Option<serde_json::Value>) -> Self {
        let Some(text) = text else {
            return Self::Erased;
        };
        let media_kind = match kind.parse::<Modality>() {
            Ok(Modality::Image) => "image",
            Ok(Modality::Video) => "video",
            Ok(Modality::Audio) => "audio",
            Ok(Modality::Text) | Err(_) => {
                let chat = messages
                    .and_then(|m| serde_json::from_value::<Vec<ChatMessage>>(m).ok())
                    .filter(|m| !m.is_empty());
                return match chat {
                    Some(messages) => Self::Chat(
                        messages
                            .into_iter()
                            .map(|m| MessageRow {
                                role: m.role.as_str(),
                                content: m.content,
                            })
                            .collect(),
                    ),
                    None => Self::Text(text),
                };
            }
        };
        match url_guard::parse(&text, UrlUse::Media) {
            Ok(url) => {
                let origin = url.origin().ascii_serialization();
                Self::Media(Media {
                    kind: media_kind,
                    url: url.to_string(),
                    origin,
                })
            }
            Err(_) => Self::Link(text),
        }
    }

    /// The media, when it is some.
    pub fn media(&self) -> Option<&Media> {
        match self {
            Self::Media(media) => Some(media),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_urls_are_shown_as_their_kind_with_their_origin() {
        let image = Content::new(
            "image",
            Some("https://cdn.example:8443/a/b.png?x=1".into()),
            None,
        );
        let audio = Content::new(
            "audio",
            Some("http://127.0.0.1:9000/file/a.wav".into()),
            None,
        );

        assert_eq!(
            image,
            Content::Media(Media {
                kind: "image",
                url: "https://cdn.example:8443/a/b.png?x=1".into(),
                origin: "https://cdn.example:8443".into(),
            })
        );
        assert_eq!(image.media().map(Media::is_visual), Some(true));
        assert_eq!(
            audio.media().map(|m| m.origin.as_str()),
            Some("http://127.0.0.1:9000")
        );
        assert_eq!(audio.media().map(Media::is_visual), Some(false));
    }

    #[test]
    fn a_url_that_cannot_be_shown_is_text() {
        assert_eq!(
            Content::new("video", Some("javascript:alert(1)".into()), None),
            Content::Link("javascript:alert(1)".into())
        );
    }

    #[test]
    fn a_chat_is_its_messages_and_a_prompt_its_text() {
        let messages = serde_json::json!([
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}
        ]);

        assert_eq!(
            Content::new(
                "text",
                Some("user: hi\nassistant: hello".into()),
                Some(messages)
            ),
            Content::Chat(vec![
                MessageRow {
                    role: "user",
                    content: "hi".into()
                },
                MessageRow {
                    role: "assistant",
                    content: "hello".into()
                },
            ])
        );
        assert_eq!(
            Content::new("text", Some("a prompt".into()), None),
            Content::Text("a prompt".into())
        );
    }

    #[test]
    fn erased_content_is_shown_as_erased_whatever_the_type() {
        for kind in ["text", "image", "audio"] {
            assert_eq!(Content::new(kind, None, None), Content::Erased);
        }
    }
}
