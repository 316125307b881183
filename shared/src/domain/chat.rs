//! A chat message, as the api parses it, the jobs table stores it and the worker reads it.

use serde::{Deserialize, Serialize};

word_enum!(
    /// Who wrote a chat message.
    ChatRole, UnknownChatRole, "chat role" {
        /// The person talking to the model.
        User => "user",
        /// The model.
        Assistant => "assistant",
        /// The operator's instructions.
        System => "system",
    }
);

/// One chat message as submitted: `{"role": "user"|"assistant"|"system", "content": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: ChatRole,
    /// The message text.
    pub content: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_its_wire_shape() {
        let raw = r#"{"role":"assistant","content":"Sure."}"#;
        let message: ChatMessage = serde_json::from_str(raw).unwrap();
        assert_eq!(message.role, ChatRole::Assistant);
        assert_eq!(serde_json::to_string(&message).unwrap(), raw);
    }

    #[test]
    fn an_unknown_role_or_field_is_refused() {
        assert!(serde_json::from_str::<ChatMessage>(r#"{"role":"bot","content":""}"#).is_err());
        assert!(
            serde_json::from_str::<ChatMessage>(r#"{"role":"user","content":"","name":"x"}"#)
                .is_err()
        );
    }
}
