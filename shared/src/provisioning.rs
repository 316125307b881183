//! Creating accounts and issuing keys: the rules shared by `modctl` and the test harness.

use time::OffsetDateTime;

use crate::{
    db::{
        self, accounts, api_keys,
        audit_events::{self, Actor, Target},
        DbError, GenericClient,
    },
    domain::{AccountId, AuditAction, Scope},
    keys,
    policy::PolicyDefaults,
};

/// Why a key could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The account does not exist.
    #[error("account {0} not found")]
    AccountNotFound(AccountId),
    /// The account is terminated.
    #[error("account {0} is terminated")]
    AccountTerminated(AccountId),
    /// A scope can never be issued to a key.
    #[error("scope {0} is reserved for staff dashboard access and is never issued to a key")]
    ScopeNotIssuable(Scope),
    /// A registry scope for an account that is not a vetted member.
    #[error("scope {0} needs an account vetted as a registry member")]
    NotRegistryMember(Scope),
    /// No scopes were asked for.
    #[error("a key needs at least one scope")]
    NoScopes,
    /// The random source failed.
    #[error(transparent)]
    Random(#[from] keys::RandomError),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A key just issued; `key` is the only time the full value exists.
#[derive(Debug, serde::Serialize)]
pub struct IssuedKey {
    /// The stored key's id.
    pub key_id: crate::domain::ApiKeyId,
    /// The full key value, shown once.
    pub key: String,
    /// The display prefix.
    pub prefix: String,
    /// Granted scopes.
    pub scopes: Vec<String>,
}

/// Issues a key for `account_id`, recorded in the audit log (`key.created`). `scopes` of
/// `None` gives the client defaults. Run it in a transaction.
pub async fn issue_key(
    client: &impl GenericClient,
    actor: Actor,
    account_id: AccountId,
    name: Option<&str>,
    scopes: Option<&[Scope]>,
    expires_at: Option<OffsetDateTime>,
) -> Result<IssuedKey, ProvisionError> {
    let mut scopes: Vec<Scope> =
        scopes.map_or_else(|| Scope::CLIENT_DEFAULT.to_vec(), <[_]>::to_vec);
    scopes.sort();
    scopes.dedup();
    if scopes.is_empty() {
        return Err(ProvisionError::NoScopes);
    }
    if let Some(scope) = scopes.iter().find(|s| !s.issuable_to_keys()) {
        return Err(ProvisionError::ScopeNotIssuable(*scope));
    }
    let account = accounts::get(client, account_id)
        .await?
        .ok_or(ProvisionError::AccountNotFound(account_id))?;
    if account.terminated {
        return Err(ProvisionError::AccountTerminated(account_id));
    }
    if let Some(scope) = scopes
        .iter()
        .find(|s| s.needs_registry_membership() && !account.registry_member)
    {
        return Err(ProvisionError::NotRegistryMember(*scope));
    }
    let generated = keys::generate()?;
    let stored = api_keys::insert(
        client,
        &api_keys::NewApiKey {
            account_id,
            name,
            prefix: &generated.prefix,
            hash: &generated.hash,
            scopes: &scopes,
            expires_at,
        },
    )
    .await?;
    audit_events::record(
        client,
        account_id,
        actor,
        AuditAction::KeyCreated,
        &Target::new("key", stored.key_id),
        serde_json::json!({
            "name": stored.name, "prefix": stored.prefix, "scopes": stored.scopes,
        }),
    )
    .await?;
    Ok(IssuedKey {
        key_id: stored.key_id,
        key: generated.key,
        prefix: stored.prefix,
        scopes: stored.scopes,
    })
}

/// Creates an account with the default plan and its policy version 1, holding `defaults`
/// (`APP_TEXT_THRESHOLD`, `APP_NSFW_THRESHOLD`). Run it in a transaction.
pub async fn create_account(
    client: &impl GenericClient,
    name: &str,
    defaults: &PolicyDefaults,
) -> Result<accounts::Account, DbError> {
    let account = db::accounts::insert(client, name).await?;
    db::policy_versions::insert_first(client, account.id, defaults).await?;
    Ok(account)
}
