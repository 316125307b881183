//! What the text model embeds of a submission: segments short enough for the model (it reads
//! 128 tokens) and small enough that one harmful sentence is not drowned by a long harmless
//! text. A chat gives each message alone and each message after the one before it (its
//! context); a long text is cut at sentence ends into pieces of about [`WORDS`] words.

use crate::classify::TextContent;

/// Words per segment, about: a sentence longer than this is cut between words.
pub const WORDS: usize = 40;

/// The segments of `content`, in order; none for a text without words.
pub fn segments(content: TextContent<'_>) -> Vec<String> {
    match content.messages {
        Some(messages) => {
            let mut out = Vec::new();
            for (i, message) in messages.iter().enumerate() {
                out.extend(split(&message.content));
                if let Some(previous) = i.checked_sub(1).and_then(|p| messages.get(p)) {
                    if has_words(&previous.content) && has_words(&message.content) {
                        out.extend(split(&format!("{}\n{}", previous.content, message.content)));
                    }
                }
            }
            out
        }
        None => split(content.text),
    }
}

fn has_words(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

/// `text` cut at sentence ends into pieces of at most about [`WORDS`] words.
fn split(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for word in text.split_whitespace() {
        current.push(word);
        let sentence_end = word.ends_with(['.', '!', '?', ';']);
        if current.len() >= 2 * WORDS || (sentence_end && current.len() >= WORDS) {
            pieces.push(current.join(" "));
            current.clear();
        }
    }
    if !current.is_empty() {
        pieces.push(current.join(" "));
    }
    pieces.retain(|piece| has_words(piece));
    pieces
}

#[cfg(test)]
mod tests {
    use moderation_shared::domain::{ChatMessage, ChatRole};

    use super::*;

    fn text(text: &str) -> Vec<String> {
        segments(TextContent {
            text,
            messages: None,
        })
    }

    #[test]
    fn a_short_text_is_one_segment_and_a_text_without_words_none() {
        assert_eq!(
            text("  Hello   there. How are you? "),
            ["Hello there. How are you?"]
        );
        assert!(text(" ?! ... ").is_empty());
        assert!(text("").is_empty());
    }

    #[test]
    fn a_long_text_is_cut_at_sentence_ends_and_long_sentences_between_words() {
        let sentence = format!("{}end.", "word ".repeat(WORDS));
        let long = format!("{sentence} {sentence} tail");
        let pieces = text(&long);
        assert_eq!(pieces.len(), 3);
        assert!(pieces[0].ends_with("end.") && pieces[2] == "tail");
        let run_on = "word ".repeat(5 * WORDS);
        assert!(text(&run_on)
            .iter()
            .all(|p| p.split_whitespace().count() <= 2 * WORDS));
    }

    #[test]
    fn a_chat_gives_each_message_alone_and_after_its_predecessor() {
        let messages = vec![
            ChatMessage {
                role: ChatRole::User,
                content: "Where do you live?".to_owned(),
            },
            ChatMessage {
                role: ChatRole::Assistant,
                content: "I'd rather not say.".to_owned(),
            },
        ];
        let got = segments(TextContent {
            text: "ignored when there are messages",
            messages: Some(&messages),
        });
        assert_eq!(
            got,
            [
                "Where do you live?",
                "I'd rather not say.",
                "Where do you live? I'd rather not say."
            ]
        );
    }
}
