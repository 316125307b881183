//! Who did something, in words: the audit log's actors and a job's reviewers. A leaf: it
//! imports nothing of the crate but its error.

use std::collections::{BTreeSet, HashMap};

use moderation_shared::{
    db::{api_keys, dashboard_users, GenericClient},
    domain::{AccountId, ActorType, DashboardUserId},
};
use uuid::Uuid;

use crate::error::DashboardError;

/// The names of `actors` that are cheap to find, by id: the account's keys (not deleted) by
/// prefix and name, and its users by address, each user looked up once. Operators have no
/// id; an actor not found (a deleted key, another account's user) has no name.
pub async fn names(
    client: &impl GenericClient,
    account: AccountId,
    actors: impl IntoIterator<Item = (ActorType, Uuid)>,
) -> Result<HashMap<Uuid, String>, DashboardError> {
    let mut keys = false;
    let mut users = BTreeSet::new();
    for (kind, id) in actors {
        match kind {
            ActorType::Key => keys = true,
            ActorType::User => {
                users.insert(id);
            }
            ActorType::Operator => {}
        }
    }
    let mut names = HashMap::new();
    if keys {
        for listed in api_keys::list(client, account).await? {
            let key = listed.key;
            let name = match key.name {
                Some(name) => format!("{}… ({name})", key.prefix),
                None => format!("{}…", key.prefix),
            };
            names.insert(key.key_id.0, name);
        }
    }
    for id in users {
        if let Some(user) = dashboard_users::get(client, DashboardUserId(id)).await? {
            if user.account_id == account {
                names.insert(id, user.email);
            }
        }
    }
    Ok(names)
}
