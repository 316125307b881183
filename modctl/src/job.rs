//! `modctl job --org ORG JOB_ID`: which models and which policy version decided a job (issue
//! 37), with its scores, shadow decision and latest revision, as one JSON object.

use anyhow::{anyhow, Context};
use clap::Args;
use moderation_shared::{
    clock::{self, format_millis},
    db::{jobs, model_sets, Pool},
    domain::{AccountId, JobId},
    lifecycle,
};
use serde_json::{json, Value};

/// The `job` command's arguments.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// The account the job belongs to.
    #[arg(long)]
    org: AccountId,
    /// The job.
    job_id: JobId,
}

/// The job with its model set's files and hashes (`models` is null when no built-in model
/// scored it).
pub async fn run(pool: &Pool, args: JobArgs) -> anyhow::Result<Value> {
    let floor = lifecycle::Retention::from_env()?.floor(clock::now());
    let client = pool.get().await.context("cannot reach Postgres")?;
    let job = jobs::get(&client, args.org, args.job_id, floor)
        .await?
        .ok_or_else(|| anyhow!("no job {} in account {}", args.job_id, args.org))?;
    let models = match &job.model_set {
        Some(set) => model_sets::get(&client, set).await?,
        None => None,
    };
    Ok(json!({
        "job_id": job.id,
        "type": job.kind,
        "status": job.status.as_str(),
        "completed_at": job.completed_at.map(format_millis),
        "is_prohibited": job.is_prohibited,
        "revision": job.revision,
        "decided_by": job.decided_by.as_str(),
        "policy_version": job.policy_version,
        "shadow": job.shadow,
        "scores": job.scores,
        "language": job.language,
        "model_set": job.model_set,
        "models": models,
    }))
}
