//! Downloading media for classification (contract section 2).
//!
//! The worker, not the api, fetches: every hop's URL is checked by the URL guard (http or https,
//! no userinfo, every resolved address allowed), every address connected to is checked again at
//! connect time (the client resolves through the guard, so DNS rebinding gains nothing), at most
//! [`MAX_REDIRECTS`] redirects are followed, and reading stops past the size limit. One deadline
//! covers the whole download, redirects included. The body is read into one buffer and handed
//! on as [`bytes::Bytes`], which every later step shares without copying.

use std::{error::Error as _, time::Duration};

use bytes::BytesMut;
use futures_util::StreamExt;
use moderation_shared::{
    domain::FailureCode,
    url_guard::{self, UrlError, UrlGuard, UrlUse},
};
use reqwest::{header, StatusCode};
use url::Url;

use crate::{classify::Media, failure::Failure};

/// The most media bytes read: 100 MB, counted as 100 MiB (104,857,600 bytes).
pub const MAX_MEDIA_BYTES: u64 = 100 * 1024 * 1024;

/// The most redirects followed from the submitted URL.
pub const MAX_REDIRECTS: usize = 3;

/// Downloads media.
#[derive(Clone)]
pub struct MediaFetcher {
    client: reqwest::Client,
    guard: UrlGuard,
    deadline: Duration,
    max_bytes: u64,
}

impl MediaFetcher {
    /// A fetcher checking with `guard`, giving each download `deadline`, trusting
    /// `extra_ca_pem` besides the system roots.
    pub fn new(
        guard: UrlGuard,
        deadline: Duration,
        extra_ca_pem: Option<&[u8]>,
    ) -> Result<Self, reqwest::Error> {
        let client = url_guard::http_client_builder(&guard, extra_ca_pem)?
            .connect_timeout(deadline)
            .user_agent(concat!("moderation-worker/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            client,
            guard,
            deadline,
            max_bytes: MAX_MEDIA_BYTES,
        })
    }

    /// The same fetcher with another size limit (tests use a small one).
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Downloads `url`.
    pub async fn fetch(&self, url: &str) -> Result<Media, Failure> {
        match tokio::time::timeout(self.deadline, self.follow(url)).await {
            Ok(result) => result,
            Err(_) => Err(Failure::transient(
                FailureCode::MediaUnreachable,
                "The media did not download in time.",
            )),
        }
    }

    async fn follow(&self, raw: &str) -> Result<Media, Failure> {
        let mut url = self.check(raw).await?;
        for hop in 0..=MAX_REDIRECTS {
            let response = self
                .client
                .get(url.clone())
                .send()
                .await
                .map_err(transport)?;
            let status = response.status();
            if status.is_redirection() {
                if hop == MAX_REDIRECTS {
                    return Err(Failure::permanent(
                        FailureCode::MediaUnreachable,
                        format!("The media URL redirected more than {MAX_REDIRECTS} times."),
                    ));
                }
                let location = response
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| {
                        Failure::permanent(
                            FailureCode::MediaUnreachable,
                            "The media URL redirected without a valid location.",
                        )
                    })?;
                url = self.check(location.as_str()).await?;
                continue;
            }
            return self.read(status, response).await;
        }
        Err(Failure::permanent(
            FailureCode::MediaUnreachable,
            "The media URL redirected too often.",
        ))
    }

    /// Checks one hop's URL with the guard.
    async fn check(&self, raw: &str) -> Result<Url, Failure> {
        self.guard
            .check(raw, UrlUse::Media)
            .await
            .map(|checked| checked.url)
            .map_err(refused)
    }

    async fn read(
        &self,
        status: StatusCode,
        response: reqwest::Response,
    ) -> Result<Media, Failure> {
        if !status.is_success() {
            let message = format!("The media server answered {}.", status.as_u16());
            return Err(
                if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                    Failure::transient(FailureCode::MediaUnreachable, message)
                } else {
                    Failure::permanent(FailureCode::MediaUnreachable, message)
                },
            );
        }
        let too_large = || {
            Failure::permanent(
                FailureCode::MediaTooLarge,
                format!("The media is larger than {} bytes.", self.max_bytes),
            )
        };
        if response
            .content_length()
            .is_some_and(|n| n > self.max_bytes)
        {
            return Err(too_large());
        }
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .filter(|v| !v.is_empty());
        // One buffer for the whole body: sized up front when the server declares a length (at
        // most the limit, already checked), else grown in place; frozen without a copy. The
        // limit is enforced while reading either way: a declared length can lie.
        let declared = response.content_length().unwrap_or(0);
        let mut bytes = BytesMut::with_capacity(usize::try_from(declared).unwrap_or(0));
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(transport)?;
            if (bytes.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Media {
            bytes: bytes.freeze(),
            content_type,
        })
    }
}

/// A URL the guard refused.
fn refused(err: UrlError) -> Failure {
    match err {
        UrlError::Unresolvable => Failure::transient(
            FailureCode::MediaUnreachable,
            "The media host name did not resolve.",
        ),
        other => Failure::permanent(
            FailureCode::UrlNotAllowed,
            format!("The media URL is not allowed: {other}."),
        ),
    }
}

/// A transport failure: refused by the guard at connect time, or worth another try.
fn transport(err: reqwest::Error) -> Failure {
    let mut source = err.source();
    while let Some(cause) = source {
        if let Some(url_error) = cause.downcast_ref::<UrlError>() {
            return refused(url_error.clone());
        }
        source = cause.source();
    }
    Failure::transient(
        FailureCode::MediaUnreachable,
        "The media could not be downloaded.",
    )
}
