//! Text jobs: prompts and chats.

use moderation_shared::db::jobs::ClaimedJob;

use crate::{
    checks::Checks,
    classify::{ChatMessage, TextContent, Verdict},
    failure::Failure,
};

/// Classifies a claimed text job: the blocklists first, then the provider.
pub async fn classify(checks: &Checks, job: &ClaimedJob) -> Result<Verdict, Failure> {
    let messages: Option<Vec<ChatMessage>> = match &job.messages {
        Some(value) => Some(serde_json::from_value(value.clone()).map_err(|_| {
            Failure::permanent("INTERNAL", "The stored chat messages could not be read.")
        })?),
        None => None,
    };
    let policy = checks.policy(job).await?;
    let content = TextContent {
        text: &job.content,
        messages: messages.as_deref(),
    };
    checks.check_text(content, &policy).await
}
