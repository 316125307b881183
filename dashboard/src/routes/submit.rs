//! Submitting content from the dashboard: a prompt, a chat (messages typed as `role: text`
//! lines), or the URL of an image, video or audio file. Such a job has no `api_key_id` (no key was used); it is stored and enqueued exactly
//! as the api does, and its webhook goes to the account's global URL.

use actix_web::{http::StatusCode, web, HttpResponse};
use askama::Template;
use moderation_shared::{
    db::jobs::{self, NewJob},
    domain::{ChatMessage, ChatRole, JobId, Modality},
    url_guard::UrlUse,
};

use crate::{
    error::DashboardError,
    form::{Fields, Posted},
    nav::Nav,
    pages::{render, render_with, see_other},
    session::Session,
    state::AppState,
};

/// The most messages a chat may have (the api's limit).
const MAX_CHAT_MESSAGES: usize = 500;

/// Registers the routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/submit", web::get().to(form))
        .route("/submit", web::post().to(submit));
}

#[derive(Template, Default)]
#[template(path = "submit.html")]
struct SubmitPage {
    nav: Option<Nav>,
    csrf: String,
    /// The refused form (`text`, `chat` or `media`) and why; the page shows the message
    /// inside that form, with what was typed.
    refused: Option<(&'static str, String)>,
    text: String,
    messages: String,
    media: String,
    url: String,
}

impl SubmitPage {
    /// The message shown in `form`, if it was the refused one.
    fn error_in(&self, form: &str) -> Option<&str> {
        self.refused
            .as_ref()
            .filter(|(refused, _)| *refused == form)
            .map(|(_, message)| message.as_str())
    }
}

async fn form(session: Session) -> Result<HttpResponse, DashboardError> {
    render(&SubmitPage {
        nav: Some(session.nav("submit")),
        csrf: session.csrf.clone(),
        ..SubmitPage::default()
    })
}

async fn submit(
    state: web::Data<AppState>,
    posted: Posted,
) -> Result<HttpResponse, DashboardError> {
    let Posted { session, fields } = posted;
    let (modality, content, messages) = match checked(&state, &fields).await {
        Ok(checked) => checked,
        Err(DashboardError::BadRequest(message)) => {
            // The form again, with its error and what was typed, so nothing is lost.
            let form = match fields.get("type") {
                Some("chat") => "chat",
                Some("text") | None => "text",
                Some(_) => "media",
            };
            let typed = |name| fields.all(name).next().unwrap_or_default().to_owned();
            let page = SubmitPage {
                nav: Some(session.nav("submit")),
                csrf: session.csrf.clone(),
                refused: Some((form, message)),
                text: typed("text"),
                messages: typed("messages"),
                media: typed("type"),
                url: typed("url"),
            };
            return render_with(&page, StatusCode::BAD_REQUEST);
        }
        Err(err) => return Err(err),
    };
    let id = JobId::new();
    let job = NewJob {
        id,
        account_id: session.account(),
        api_key_id: None,
        modality,
        content,
        messages,
        webhook_url: None,
        idempotency: None,
    };
    {
        let client = state.pool.get().await.map_err(anyhow::Error::from)?;
        jobs::insert_many(&client, std::slice::from_ref(&job)).await?;
    }
    if let Err(err) = state.queue.enqueue_many(modality, &[id]).await {
        // Stored: the relay enqueues it once Redis is back.
        tracing::warn!(error = %err, job = %id, "Could not enqueue a dashboard submission; the relay enqueues it later");
        let client = state.pool.get().await.map_err(anyhow::Error::from)?;
        jobs::mark_not_enqueued(&client, &[id]).await?;
    }
    tracing::info!(job = %id, account = %session.account(), %modality, "Job submitted from the dashboard");
    Ok(see_other(&format!("/jobs/{id}")))
}

/// The posted form checked: what to store (modality, content and a chat's messages), or a
/// [`DashboardError::BadRequest`] saying what to correct.
async fn checked(
    state: &AppState,
    fields: &Fields,
) -> Result<(Modality, String, Option<Vec<ChatMessage>>), DashboardError> {
    if fields.get("type") == Some("chat") {
        let messages = chat_messages(fields.all("messages").next().unwrap_or_default())
            .map_err(DashboardError::BadRequest)?;
        // Stored as the api stores a chat: a text job whose content is the `role: content`
        // lines, with the messages beside it.
        let content = messages
            .iter()
            .map(|m| format!("{}: {}", m.role.as_str(), m.content))
            .collect::<Vec<_>>()
            .join("\n");
        return Ok((Modality::Text, content, Some(messages)));
    }
    let modality: Modality = fields
        .get("type")
        .unwrap_or("text")
        .parse()
        .map_err(|_| DashboardError::BadRequest("Choose what to submit.".to_owned()))?;
    Ok((
        modality,
        single_content(state, fields, modality).await?,
        None,
    ))
}

/// The content of a prompt or a media submission, checked.
async fn single_content(
    state: &AppState,
    fields: &Fields,
    modality: Modality,
) -> Result<String, DashboardError> {
    Ok(match modality {
        Modality::Text => {
            let text = fields.get("text").ok_or_else(|| {
                DashboardError::BadRequest("Enter the prompt to moderate.".to_owned())
            })?;
            if text.contains('\0') {
                return Err(DashboardError::BadRequest(
                    "The prompt must not contain NUL characters.".to_owned(),
                ));
            }
            text.to_owned()
        }
        media => {
            let url = fields.get("url").ok_or_else(|| {
                DashboardError::BadRequest(format!("Enter the URL of the {media}."))
            })?;
            state
                .url_guard
                .check(url, UrlUse::Media)
                .await
                .map_err(|err| DashboardError::BadRequest(format!("The URL was refused: {err}.")))?
                .url
                .to_string()
        }
    })
}

/// The messages of a chat typed as lines `role: text` (`user`, `assistant` or `system`); a
/// line without a role continues the message before it. Checked as the api checks a chat:
/// 1 to 500 messages, known roles, no NUL character.
fn chat_messages(raw: &str) -> Result<Vec<ChatMessage>, String> {
    let mut messages: Vec<ChatMessage> = Vec::new();
    for (number, line) in raw.lines().enumerate() {
        let role = line.split_once(':').and_then(|(role, text)| {
            role.trim()
                .to_ascii_lowercase()
                .parse::<ChatRole>()
                .ok()
                .map(|role| (role, text.strip_prefix(' ').unwrap_or(text)))
        });
        match (role, messages.last_mut()) {
            (Some((role, text)), _) => messages.push(ChatMessage {
                role,
                content: text.to_owned(),
            }),
            (None, Some(last)) => {
                last.content.push('\n');
                last.content.push_str(line);
            }
            (None, None) if line.trim().is_empty() => {}
            (None, None) => {
                return Err(format!(
                    "Line {} must start with a role: user:, assistant: or system:.",
                    number + 1
                ))
            }
        }
    }
    for message in &mut messages {
        message.content.truncate(message.content.trim_end().len());
    }
    if messages.is_empty() || messages.len() > MAX_CHAT_MESSAGES {
        return Err(format!(
            "A chat holds 1 to {MAX_CHAT_MESSAGES} messages, one a line starting with user:, \
             assistant: or system:; got {}.",
            messages.len()
        ));
    }
    if messages.iter().any(|m| m.content.contains('\0')) {
        return Err("The messages must not contain NUL characters.".to_owned());
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_lines_become_messages_and_continuations_join_them() {
        let messages =
            chat_messages("system: Be kind.\r\nUser: hi\nthere\n\nassistant:Hello!\n").unwrap();
        let pairs: Vec<(ChatRole, &str)> = messages
            .iter()
            .map(|m| (m.role, m.content.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                (ChatRole::System, "Be kind."),
                (ChatRole::User, "hi\nthere"),
                (ChatRole::Assistant, "Hello!"),
            ]
        );
    }

    #[test]
    fn a_chat_without_roles_or_messages_is_refused() {
        assert!(chat_messages("hello there").unwrap_err().contains("Line 1"));
        assert!(chat_messages("bot: hi").unwrap_err().contains("Line 1"));
        assert!(chat_messages("  \n").unwrap_err().contains("1 to 500"));
        assert!(chat_messages("user: a\0b").is_err());
        let too_many = "user: x\n".repeat(MAX_CHAT_MESSAGES + 1);
        assert!(chat_messages(&too_many).unwrap_err().contains("got 501"));
    }
}
