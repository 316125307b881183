//! Command definitions and their execution.

use anyhow::{anyhow, Context};
use clap::{Parser, Subcommand, ValueEnum};

use crate::instant::parse_rfc3339;
use moderation_shared::{
    config::DatabaseSettings,
    db::{self, accounts, api_keys, audit_events::Actor, GenericClient, Pool},
    domain::{AccountId, ApiKeyId, Scope},
    policy::PolicyDefaults,
    provisioning,
};
use serde_json::{json, Value};
use time::OffsetDateTime;

/// Operator CLI of the moderation service.
#[derive(Debug, Parser)]
#[command(name = "modctl", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Applies pending database migrations.
    Migrate,
    /// Accounts (organisations).
    Org {
        #[command(subcommand)]
        command: OrgCommand,
    },
    /// API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// The Shared Registry: email hashing and dispute decisions.
    Registry {
        #[command(subcommand)]
        command: crate::registry::RegistryCommand,
    },
    /// Hash banks of known media, global or an account's own.
    Hashbank {
        #[command(subcommand)]
        command: crate::hashbank::HashbankCommand,
    },
    /// People who sign in to the web dashboard.
    User {
        #[command(subcommand)]
        command: crate::user::UserCommand,
    },
    /// An account's audit log as JSON lines, newest first.
    Audit(crate::audit::AuditArgs),
    /// One job: which models (their files' hashes) and which policy version decided it.
    Job(crate::job::JobArgs),
    /// The data lifecycle: time partitions, retention and content erasure.
    Lifecycle {
        #[command(subcommand)]
        command: crate::lifecycle::LifecycleCommand,
    },
}

/// What a command prints: one JSON value, or JSON lines.
#[derive(Debug)]
pub enum Output {
    /// One value.
    One(Value),
    /// One value per line.
    Lines(Vec<Value>),
}

#[derive(Debug, Subcommand)]
enum OrgCommand {
    /// Creates an account; prints `{"org_id"}`.
    Create {
        /// Display name.
        #[arg(long)]
        name: String,
    },
    /// Terminates an account: every key of it gets 403 ACCOUNT_TERMINATED.
    Terminate {
        /// The account id.
        org: AccountId,
    },
    /// Changes an account's plan.
    Set {
        /// The account id.
        org: AccountId,
        /// Requests per minute across all endpoints.
        #[arg(long)]
        rate_per_minute: Option<u32>,
        /// NSFW check on image and video jobs.
        #[arg(long)]
        nsfw_check: Option<Switch>,
        /// Registry checks per UTC day.
        #[arg(long)]
        check_quota: Option<u32>,
        /// Vetted Shared Registry membership.
        #[arg(long)]
        registry_member: Option<Switch>,
    },
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Issues a key; prints `{"key_id", "key", "prefix", "scopes"}`. The key is shown only here.
    Create {
        /// The owning account.
        #[arg(long)]
        org: AccountId,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// Comma-separated scopes (default: the client defaults of the spec).
        #[arg(long, value_delimiter = ',')]
        scopes: Option<Vec<Scope>>,
        /// When the key stops working (RFC 3339).
        #[arg(long, value_parser = parse_rfc3339)]
        expires_at: Option<OffsetDateTime>,
    },
    /// Disables a key.
    Disable {
        /// The key id.
        key_id: ApiKeyId,
    },
    /// Enables a disabled key.
    Enable {
        /// The key id.
        key_id: ApiKeyId,
    },
    /// Deletes a key; jobs keep its id, its name stops resolving.
    Delete {
        /// The key id.
        key_id: ApiKeyId,
    },
    /// Renames a key.
    Rename {
        /// The key id.
        key_id: ApiKeyId,
        /// The new name.
        name: String,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Switch {
    On,
    Off,
}

impl From<Switch> for bool {
    fn from(s: Switch) -> bool {
        matches!(s, Switch::On)
    }
}

/// Runs a command and returns its JSON output.
pub async fn run(cli: Cli) -> anyhow::Result<Output> {
    let pool = connect()?;
    let pool = &pool;
    let one = match cli.command {
        Command::Migrate => {
            let applied = db::migrate(pool).await?;
            // Accounts made before policy versions existed get their version 1 now, holding
            // the service defaults of this environment.
            let defaults = PolicyDefaults::from_env()?;
            let client = pool.get().await.context("cannot reach Postgres")?;
            let versioned = db::policy_versions::backfill(&client, &defaults).await?;
            json!({ "applied": applied, "policy_versions_written": versioned })
        }
        Command::Org { command } => org(pool, command).await?,
        Command::Key { command } => key(pool, command).await?,
        Command::Registry { command } => crate::registry::run(pool, command).await?,
        Command::Hashbank { command } => crate::hashbank::run(pool, command).await?,
        Command::User { command } => crate::user::run(pool, command).await?,
        Command::Audit(args) => return crate::audit::run(pool, args).await.map(Output::Lines),
        Command::Lifecycle { command } => crate::lifecycle::run(pool, command).await?,
        Command::Job(args) => crate::job::run(pool, args).await?,
    };
    Ok(Output::One(one))
}

fn connect() -> anyhow::Result<Pool> {
    let settings = DatabaseSettings::from_env()?;
    Ok(db::pool(&DatabaseSettings {
        pool_size: 2,
        ..settings
    })?)
}

async fn org(pool: &Pool, command: OrgCommand) -> anyhow::Result<Value> {
    let mut client = pool.get().await.context("cannot reach Postgres")?;
    let tx = client.transaction().await?;
    let output = org_change(&tx, command).await?;
    tx.commit().await?;
    Ok(output)
}

/// An `org` command's change, in the caller's transaction.
async fn org_change(client: &impl GenericClient, command: OrgCommand) -> anyhow::Result<Value> {
    match command {
        OrgCommand::Create { name } => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 200 {
                return Err(anyhow!("--name must be 1 to 200 characters"));
            }
            let defaults = PolicyDefaults::from_env()?;
            let account = provisioning::create_account(client, name, &defaults).await?;
            Ok(json!({ "org_id": account.id }))
        }
        OrgCommand::Terminate { org } => {
            let account = accounts::terminate(client, Actor::Operator, org)
                .await?
                .ok_or_else(|| anyhow!("account {org} not found"))?;
            Ok(serde_json::to_value(account)?)
        }
        OrgCommand::Set {
            org,
            rate_per_minute,
            nsfw_check,
            check_quota,
            registry_member,
        } => {
            if rate_per_minute == Some(0) {
                return Err(anyhow!("--rate-per-minute must be at least 1"));
            }
            let update = accounts::PlanUpdate {
                rate_per_minute,
                check_quota_daily: check_quota,
                nsfw_check: nsfw_check.map(bool::from),
                registry_member: registry_member.map(bool::from),
            };
            let account = accounts::update_plan(client, Actor::Operator, org, &update)
                .await?
                .ok_or_else(|| anyhow!("account {org} not found"))?;
            Ok(serde_json::to_value(account)?)
        }
    }
}

async fn key(pool: &Pool, command: KeyCommand) -> anyhow::Result<Value> {
    let mut client = pool.get().await.context("cannot reach Postgres")?;
    let tx = client.transaction().await?;
    let output = key_change(&tx, command).await?;
    tx.commit().await?;
    Ok(output)
}

/// A `key` command's change, in the caller's transaction.
async fn key_change(client: &impl GenericClient, command: KeyCommand) -> anyhow::Result<Value> {
    let key = match command {
        KeyCommand::Create {
            org,
            name,
            scopes,
            expires_at,
        } => {
            let issued = provisioning::issue_key(
                client,
                Actor::Operator,
                org,
                name.as_deref(),
                scopes.as_deref(),
                expires_at,
            )
            .await?;
            return Ok(serde_json::to_value(issued)?);
        }
        KeyCommand::Disable { key_id } => {
            api_keys::set_enabled(client, Actor::Operator, key_id, false).await?
        }
        KeyCommand::Enable { key_id } => {
            api_keys::set_enabled(client, Actor::Operator, key_id, true).await?
        }
        KeyCommand::Delete { key_id } => api_keys::delete(client, Actor::Operator, key_id).await?,
        KeyCommand::Rename { key_id, name } => {
            let name = name.trim();
            if name.is_empty() || name.chars().count() > 200 {
                return Err(anyhow!("the name must be 1 to 200 characters"));
            }
            api_keys::rename(client, Actor::Operator, key_id, name).await?
        }
    };
    let key = key.ok_or_else(|| anyhow!("key not found (or deleted)"))?;
    Ok(serde_json::to_value(key)?)
}
