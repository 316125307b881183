//! Sending one attempt: signed, with a hard deadline, no redirects, no proxies, and every
//! address connected to checked by the URL guard.

use std::time::{Duration, Instant};

use moderation_shared::{
    signing,
    url_guard::{self, UrlError, UrlGuard, UrlUse},
};

/// The most response-body bytes kept per attempt.
pub const MAX_KEPT_BODY: usize = 2048;

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx answer.
    Acknowledged {
        /// The status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// A non-2xx answer (3xx included: redirects are not followed).
    Refused {
        /// The status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// No answer in time, or a transport failure.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// The target can never be delivered to.
    Undeliverable {
        /// Why.
        reason: UrlError,
    },
}

/// Sends attempts.
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    guard: UrlGuard,
    deadline: Duration,
}

/// The HTTP client could not be built (a bad extra CA file).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the webhook HTTP client")]
pub struct SenderError(#[from] reqwest::Error);

impl Sender {
    /// A sender with a per-attempt `deadline` trusting `extra_ca_pem` besides the system roots.
    pub fn new(
        guard: UrlGuard,
        deadline: Duration,
        extra_ca_pem: Option<&[u8]>,
    ) -> Result<Self, SenderError> {
        let client = url_guard::http_client_builder(&guard, extra_ca_pem)?
            .timeout(deadline)
            .connect_timeout(deadline)
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("moderation-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            client,
            guard,
            deadline,
        })
    }

    /// Sends `body` to `url` signed with `secrets` at `timestamp` (Unix seconds).
    pub async fn send(
        &self,
        url: &str,
        delivery_id: &str,
        secrets: &[String],
        timestamp: i64,
        body: &[u8],
    ) -> (Outcome, Duration) {
        let started = Instant::now();
        let outcome = match tokio::time::timeout(
            self.deadline,
            self.attempt(url, delivery_id, secrets, timestamp, body),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Outcome::Failed {
                error: format!("no complete answer within {} ms", self.deadline.as_millis()),
            },
        };
        (outcome, started.elapsed())
    }

    async fn attempt(
        &self,
        url: &str,
        delivery_id: &str,
        secrets: &[String],
        timestamp: i64,
        body: &[u8],
    ) -> Outcome {
        let parsed = match url_guard::parse(url, UrlUse::Webhook) {
            Ok(parsed) => parsed,
            Err(reason) => return Outcome::Undeliverable { reason },
        };
        match self.guard.resolve_checked(&parsed).await {
            Ok(_) => {}
            Err(reason @ (UrlError::NotPublic | UrlError::NoHost | UrlError::Malformed)) => {
                return Outcome::Undeliverable { reason }
            }
            Err(err) => {
                return Outcome::Failed {
                    error: err.to_string(),
                }
            }
        }
        let signature = match signing::signature_header(
            secrets.iter().map(String::as_str),
            delivery_id,
            timestamp,
            body,
        ) {
            Ok(signature) => signature,
            Err(err) => {
                return Outcome::Failed {
                    error: err.to_string(),
                }
            }
        };
        let request = self
            .client
            .post(parsed)
            .header("content-type", "application/json")
            .header("webhook-id", delivery_id)
            .header("X-Service-Delivery-Id", delivery_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_vec());
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                return Outcome::Failed {
                    error: describe(&err),
                }
            }
        };
        let status = response.status().as_u16();
        let mut kept = Vec::new();
        while kept.len() < MAX_KEPT_BODY {
            match response.chunk().await {
                Ok(Some(chunk)) => kept.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(err) => {
                    return Outcome::Failed {
                        error: describe(&err),
                    };
                }
            }
        }
        kept.truncate(MAX_KEPT_BODY);
        let body = String::from_utf8_lossy(&kept).into_owned();
        if (200..300).contains(&status) {
            Outcome::Acknowledged { status, body }
        } else {
            Outcome::Refused { status, body }
        }
    }
}

fn describe(err: &reqwest::Error) -> String {
    let mut out = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
