//! `modctl hashbank`: entries of the hash banks, global or an account's own.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};
use clap::{ArgGroup, Args, Subcommand};
use moderation_shared::{
    db::{
        accounts, custom_categories,
        hash_bank::{self, NewEntry, BUILT_IN_CATEGORIES},
        GenericClient, Pool,
    },
    domain::AccountId,
    media_hash,
};
use serde_json::{json, Value};

/// Hash bank subcommands.
#[derive(Debug, Subcommand)]
pub enum HashbankCommand {
    /// Adds an entry; prints `{"entry_id", "category", "sha256", "pdq"}` (null where absent).
    /// Adding an identical entry again prints the first one.
    Add(AddArgs),
}

/// What `hashbank add` stores.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("owner").required(true).args(["org", "global"])))]
#[command(group(ArgGroup::new("source").required(true).args(["file", "pdq", "sha256"])))]
pub struct AddArgs {
    /// The account whose own bank gets the entry.
    #[arg(long)]
    org: Option<AccountId>,
    /// The service's global bank, checked for every account.
    #[arg(long)]
    global: bool,
    /// What a match flags: nsfw, underage, ai_adult_general, or (with --org) the name of one of
    /// the account's custom categories.
    #[arg(long)]
    category: String,
    /// A media file: its SHA-256 is stored and, when it is a PNG, JPEG, GIF or WebP image,
    /// its PDQ hash.
    #[arg(long)]
    file: Option<PathBuf>,
    /// A PDQ hash, 64 hex digits.
    #[arg(long, value_parser = parse_hash)]
    pdq: Option<[u8; 32]>,
    /// A SHA-256, 64 hex digits.
    #[arg(long, value_parser = parse_hash)]
    sha256: Option<[u8; 32]>,
}

/// Runs a hash bank subcommand.
pub async fn run(pool: &Pool, command: HashbankCommand) -> anyhow::Result<Value> {
    match command {
        HashbankCommand::Add(args) => add(pool, args).await,
    }
}

async fn add(pool: &Pool, args: AddArgs) -> anyhow::Result<Value> {
    let (sha256, pdq) = match &args.file {
        Some(path) => hash_file(path).await?,
        None => (args.sha256, args.pdq),
    };
    let client = pool.get().await.context("cannot reach Postgres")?;
    check_owner_and_category(&client, args.org, &args.category).await?;
    let entry = hash_bank::insert(
        &client,
        &NewEntry {
            account: args.org,
            category: args.category,
            sha256,
            pdq,
        },
    )
    .await?;
    Ok(json!({
        "entry_id": entry.id,
        "category": entry.category,
        "sha256": entry.sha256.map(hex::encode),
        "pdq": entry.pdq.map(hex::encode),
    }))
}

/// The SHA-256 of the file and, when it is an image we decode, its PDQ hash.
async fn hash_file(path: &Path) -> anyhow::Result<(Option<[u8; 32]>, Option<[u8; 32]>)> {
    let bytes = tokio::fs::read(path)
        .await
        .with_context(|| format!("cannot read {}", path.display()))?;
    let pdq = match media_hash::pdq(&bytes) {
        Ok(hash) => Some(hash),
        Err(why) => {
            eprintln!(
                "modctl: {} gets no PDQ hash ({why}); storing its SHA-256 only",
                path.display()
            );
            None
        }
    };
    Ok((Some(media_hash::sha256(&bytes)), pdq))
}

/// A global entry flags a built-in category; an account's entry a built-in one or one of the
/// account's custom categories.
async fn check_owner_and_category(
    client: &impl GenericClient,
    org: Option<AccountId>,
    category: &str,
) -> anyhow::Result<()> {
    let built_in = BUILT_IN_CATEGORIES.contains(&category);
    let Some(org) = org else {
        return if built_in {
            Ok(())
        } else {
            Err(anyhow!(
                "--category of a global entry must be one of {}",
                BUILT_IN_CATEGORIES.join(", ")
            ))
        };
    };
    if accounts::get(client, org).await?.is_none() {
        return Err(anyhow!("account {org} not found"));
    }
    if !built_in && !custom_categories::exists(client, org, category).await? {
        return Err(anyhow!(
            "--category must be one of {} or a custom category of account {org}, which has \
             none named {category:?}",
            BUILT_IN_CATEGORIES.join(", ")
        ));
    }
    Ok(())
}

/// Exactly 64 hex digits (either case).
fn parse_hash(value: &str) -> Result<[u8; 32], String> {
    if value.len() != 64 {
        return Err(format!(
            "expected 64 hex digits (32 bytes), got {} characters",
            value.chars().count()
        ));
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(value, &mut out).map_err(|_| "expected only hex digits".to_owned())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_hash;

    #[test]
    fn a_hash_is_exactly_sixty_four_hex_digits() {
        let upper = "AB".repeat(32);

        assert_eq!(parse_hash(&upper).unwrap(), [0xAB; 32]);
        assert!(parse_hash(&"ab".repeat(31)).is_err());
        assert!(parse_hash(&format!("{upper}0")).is_err());
        assert!(parse_hash(&format!("{}zz", "ab".repeat(31))).is_err());
    }
}
