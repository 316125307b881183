//! `modctl registry`: the published hash of an email address, and operators' dispute
//! decisions.

use anyhow::{anyhow, Context};
use clap::{Subcommand, ValueEnum};
use moderation_shared::{
    clock,
    db::{registry_entries, registry_entries::DisputeOutcome, Pool},
    domain::RegistryEntryId,
    registry::{normalise, DisputeAction},
};
use serde_json::Value;

/// Registry subcommands.
#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// Prints `{"normalised", "sha256", "normalisation_version"}` for an email address.
    Hash {
        /// The address.
        email: String,
    },
    /// Decides a dispute: open (active → disputed), uphold (→ revoked), reject (→ active).
    Dispute {
        /// What to do.
        action: DisputeArg,
        /// The entry id.
        entry_id: RegistryEntryId,
    },
}

/// A dispute decision.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DisputeArg {
    /// Opens a dispute on an active entry.
    Open,
    /// Upholds an open dispute: the entry is revoked with reason `dispute_upheld`.
    Uphold,
    /// Rejects an open dispute: the entry is active again.
    Reject,
}

impl From<DisputeArg> for DisputeAction {
    fn from(arg: DisputeArg) -> Self {
        match arg {
            DisputeArg::Open => DisputeAction::Open,
            DisputeArg::Uphold => DisputeAction::Uphold,
            DisputeArg::Reject => DisputeAction::Reject,
        }
    }
}

/// Runs a registry subcommand.
pub async fn run(pool: &Pool, command: RegistryCommand) -> anyhow::Result<Value> {
    match command {
        RegistryCommand::Hash { email } => {
            let out = normalise::normalise(&email).map_err(|e| anyhow!("{e}"))?;
            Ok(serde_json::to_value(out)?)
        }
        RegistryCommand::Dispute { action, entry_id } => {
            let mut client = pool.get().await.context("cannot reach Postgres")?;
            let tx = client.transaction().await?;
            let now = clock::now();
            let outcome = registry_entries::dispute(&tx, entry_id, action.into(), now).await?;
            match outcome {
                DisputeOutcome::Done(entry) => {
                    tx.commit().await?;
                    Ok(serde_json::to_value(entry.view(now))?)
                }
                DisputeOutcome::NotFound => Err(anyhow!("registry entry {entry_id} not found")),
                DisputeOutcome::Refused {
                    status,
                    has_open_dispute,
                } => Err(anyhow!(
                    "cannot {} a dispute on entry {entry_id}: its status is {} {} an open \
                     dispute; {}",
                    verb(action),
                    serde_json::to_value(status)?.as_str().unwrap_or("unknown"),
                    if has_open_dispute { "with" } else { "without" },
                    DisputeAction::from(action).requirement()
                )),
            }
        }
    }
}

fn verb(action: DisputeArg) -> &'static str {
    match action {
        DisputeArg::Open => "open",
        DisputeArg::Uphold => "uphold",
        DisputeArg::Reject => "reject",
    }
}
