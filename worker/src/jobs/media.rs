//! Image, video and audio jobs: fetch the media, match it against the hash banks, then ask the
//! provider (a vision model for images and videos, or the local NSFW model; transcription and
//! the text check for audio).

use moderation_shared::{
    db::{self, jobs::ClaimedJob},
    domain::{FailureCode, JobStage, Modality},
    media_hash,
};

use crate::{
    checks::Checks,
    classify::{local, Media, TextContent, Verdict},
    failure::Failure,
    probe,
};

/// Classifies a claimed media job of `modality` whose media is at `url`.
pub async fn classify(
    checks: &Checks,
    modality: Modality,
    job: &ClaimedJob,
    url: &str,
) -> Result<Verdict, Failure> {
    let media = checks.fetcher().fetch(url).await?;
    if modality == Modality::Audio {
        // Probing walks the container: CPU work, kept off the runtime's threads. The clone
        // shares the fetched bytes (a reference count), as do the hashes and the provider.
        let bytes = media.bytes.clone();
        let length = tokio::task::spawn_blocking(move || probe::audio_duration(bytes))
            .await
            .map_err(|_| {
                Failure::transient(FailureCode::Internal, "Probing the audio failed.")
            })??;
        if length > probe::MAX_AUDIO {
            return Err(Failure::permanent(
                FailureCode::MediaTooLong,
                "The audio is longer than 30 minutes.",
            ));
        }
    }
    let policy = checks.policy(job).await?;
    let hits = bank_hits(checks, modality, job, &media).await?;
    let banked = local::bank_verdict(modality, &hits, &policy.policy);
    if banked.prohibited {
        return Ok(banked);
    }
    match (modality, checks.model()) {
        (Modality::Image | Modality::Video, Some(provider)) => {
            checks.set_stage(job, JobStage::Classifying).await?;
            checks
                .check_visual(provider, modality, &media, &policy)
                .await
        }
        // The local provider: its NSFW model judges images and videos.
        (Modality::Image | Modality::Video, None) => {
            checks
                .check_nsfw(job, modality, &media, &policy, banked)
                .await
        }
        (Modality::Audio, _) if !checks.transcribes() => Ok(banked),
        (Modality::Audio, _) => {
            checks.set_stage(job, JobStage::Transcribing).await?;
            // The transcript lives only in this scope: never stored, logged or queued.
            let transcript = checks.transcribe(&media).await?;
            checks.set_stage(job, JobStage::Classifying).await?;
            if transcript.is_empty() {
                return Ok(local::passed(&policy.policy, false));
            }
            let content = TextContent {
                text: transcript.text(),
                messages: None,
            };
            let mut verdict = checks.check_text(content, &policy).await?;
            // The language Whisper heard, when it knows it; else the transcript's.
            if let Some(heard) = transcript.language() {
                verdict.language = Some(heard.to_owned());
            }
            Ok(verdict)
        }
        (Modality::Text, _) => Err(Failure::permanent(
            FailureCode::Internal,
            "A text job reached the media steps.",
        )),
    }
}

/// The categories of every hash-bank entry `media` matches: exact SHA-256 for every modality,
/// and the PDQ perceptual hash for images.
async fn bank_hits(
    checks: &Checks,
    modality: Modality,
    job: &ClaimedJob,
    media: &Media,
) -> Result<Vec<String>, Failure> {
    let sha256 = media_hash::sha256(&media.bytes);
    let client = checks.db().await?;
    let mut hits = db::hash_bank::categories_for_sha256(&client, job.account_id, &sha256).await?;
    if modality == Modality::Image {
        // Decoding is CPU work: keep it off the runtime's threads.
        let bytes = media.bytes.clone();
        let pdq = tokio::task::spawn_blocking(move || media_hash::pdq(&bytes))
            .await
            .map_err(|_| Failure::transient(FailureCode::Internal, "Hashing the image failed."))?
            .map_err(|_| {
                Failure::permanent(
                    FailureCode::MediaUnsupported,
                    "The image could not be decoded.",
                )
            })?;
        let entries = db::hash_bank::pdq_entries(&client, job.account_id).await?;
        hits.extend(
            entries
                .into_iter()
                .filter(|(_, bank)| {
                    media_hash::hamming(bank, &pdq) <= media_hash::PDQ_MATCH_DISTANCE
                })
                .map(|(category, _)| category),
        );
    }
    hits.sort();
    hits.dedup();
    Ok(hits)
}
