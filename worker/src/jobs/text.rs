//! Text jobs: prompts and chats.

use moderation_shared::{db::jobs::ClaimedJob, domain::FailureCode};

use crate::{
    checks::Checks,
    classify::{TextContent, Verdict},
    failure::Failure,
};

/// Classifies a claimed text job whose text is `content`: the blocklists first, then the
/// provider.
pub async fn classify(
    checks: &Checks,
    job: &ClaimedJob,
    content: &str,
) -> Result<Verdict, Failure> {
    let messages = job.chat_messages().map_err(|_| {
        Failure::permanent(
            FailureCode::Internal,
            "The stored chat messages could not be read.",
        )
    })?;
    let policy = checks.policy(job).await?;
    let content = TextContent {
        text: content,
        messages: messages.as_deref(),
    };
    checks.check_text(content, &policy).await
}
