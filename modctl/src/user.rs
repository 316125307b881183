//! `modctl user`: the people who sign in to the web dashboard.

use std::io::BufRead;

use anyhow::{anyhow, Context};
use clap::Subcommand;
use moderation_shared::{
    db::{accounts, audit_events::Actor, dashboard_users, Pool},
    domain::{AccountId, DashboardUserId},
    passwords,
};
use serde_json::{json, Value};

/// User subcommands.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Creates a dashboard user of an account, reading the password from standard input (its
    /// first line); prints `{"user_id"}`.
    Create {
        /// The account the user acts for.
        #[arg(long)]
        org: AccountId,
        /// The sign-in address (unique, any case).
        #[arg(long)]
        email: String,
        /// Also sees the staff pages (`admin:config`).
        #[arg(long)]
        staff: bool,
    },
    /// Disables a user: no more sign-ins, and its sessions end at their next request.
    Disable {
        /// The user id.
        user_id: DashboardUserId,
    },
}

/// Runs a user subcommand.
pub async fn run(pool: &Pool, command: UserCommand) -> anyhow::Result<Value> {
    match command {
        UserCommand::Create { org, email, staff } => {
            let email = email.trim();
            check_email(email)?;
            let password = read_password()?;
            let hash = passwords::hash(&password)?;
            let mut client = pool.get().await.context("cannot reach Postgres")?;
            let tx = client.transaction().await?;
            let account = accounts::get(&tx, org)
                .await?
                .ok_or_else(|| anyhow!("account {org} not found"))?;
            if account.terminated {
                return Err(anyhow!("account {org} is terminated"));
            }
            let user_id = dashboard_users::insert(&tx, Actor::Operator, org, email, &hash, staff)
                .await
                .map_err(|err| {
                    if dashboard_users::is_duplicate_email(&err) {
                        anyhow!("a dashboard user with the address {email} exists already")
                    } else {
                        err.into()
                    }
                })?;
            tx.commit().await?;
            Ok(json!({ "user_id": user_id }))
        }
        UserCommand::Disable { user_id } => {
            let mut client = pool.get().await.context("cannot reach Postgres")?;
            let tx = client.transaction().await?;
            if !dashboard_users::disable(&tx, Actor::Operator, user_id).await? {
                return Err(anyhow!("user {user_id} not found"));
            }
            tx.commit().await?;
            Ok(json!({ "user_id": user_id, "disabled": true }))
        }
    }
}

fn check_email(email: &str) -> anyhow::Result<()> {
    let well_formed = (3..=320).contains(&email.len())
        && !email.chars().any(char::is_whitespace)
        && email
            .split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && !domain.is_empty());
    if well_formed {
        Ok(())
    } else {
        Err(anyhow!(
            "--email must be an address such as ops@example.com"
        ))
    }
}

/// The first line of standard input, without its line ending.
fn read_password() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.is_empty() {
        return Err(anyhow!("give the password on standard input"));
    }
    Ok(password)
}
