//! The `job_scores` table: one narrow row per completed job, what the impact preview of a
//! policy version re-applies the version to (contract 13), without reading `jobs` or running
//! a model.
//!
//! Rows are written by `jobs::finish_many` with the result, and read for one account and one
//! window of time: the window is an id range (ids are UUIDv7), so a read is one range scan of
//! `job_scores_account_scores_idx` over the window's partitions, index-only (the index holds
//! every column the read returns: keep [`WINDOW`]'s columns and the index's `INCLUDE` alike).

use std::collections::BTreeMap;

use futures_util::{pin_mut, TryStreamExt};
use time::OffsetDateTime;
use tokio_postgres::{
    binary_copy::BinaryCopyOutStream,
    types::{Json, Type},
};
use uuid::Uuid;

use super::{BatchClient, DbError, GenericClient};
use crate::{
    domain::{id_floor, AccountId, JobId},
    outcome::Decision,
    policy::{Milli, FIXED_CATEGORIES},
};

/// The scores of a job being completed.
#[derive(Debug)]
pub struct NewScores<'a> {
    /// The job.
    pub job_id: JobId,
    /// Its account.
    pub account_id: AccountId,
    /// Its decision.
    pub decision: &'a Decision,
}

/// Stores the score rows of completed jobs (a job that has one is skipped).
pub async fn insert_many(client: &impl BatchClient, rows: &[NewScores<'_>]) -> Result<(), DbError> {
    if rows.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.job_id.0).collect();
    let accounts: Vec<Uuid> = rows.iter().map(|r| r.account_id.0).collect();
    let prohibited: Vec<bool> = rows.iter().map(|r| r.decision.is_prohibited).collect();
    let listed: Vec<bool> = rows.iter().map(|r| r.decision.listed).collect();
    let versions: Vec<Option<i32>> = rows.iter().map(|r| r.decision.policy_version).collect();
    let fixed: Vec<Vec<Option<i16>>> = FIXED_CATEGORIES
        .iter()
        .map(|name| {
            rows.iter()
                .map(|r| r.decision.fixed_score(name).map(milli_column))
                .collect()
        })
        .collect();
    let custom: Vec<Option<serde_json::Value>> =
        rows.iter().map(|r| r.decision.custom_scores()).collect();
    super::insert_batch(
        client,
        "INSERT INTO job_scores (job_id, account_id, prohibited, listed, policy_version, \
                                     harassment, hate, violence, self_harm, sexual, nsfw, custom) \
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bool[], $4::bool[], $5::int4[], \
                                  $6::int2[], $7::int2[], $8::int2[], $9::int2[], $10::int2[], \
                                  $11::int2[], $12::jsonb[]) \
             ON CONFLICT DO NOTHING",
        &[
            (&ids, Type::UUID_ARRAY),
            (&accounts, Type::UUID_ARRAY),
            (&prohibited, Type::BOOL_ARRAY),
            (&listed, Type::BOOL_ARRAY),
            (&versions, Type::INT4_ARRAY),
            (&fixed[0], Type::INT2_ARRAY),
            (&fixed[1], Type::INT2_ARRAY),
            (&fixed[2], Type::INT2_ARRAY),
            (&fixed[3], Type::INT2_ARRAY),
            (&fixed[4], Type::INT2_ARRAY),
            (&fixed[5], Type::INT2_ARRAY),
            (&custom, Type::JSONB_ARRAY),
        ],
    )
    .await?;
    Ok(())
}

/// A score as its column holds it (thousandths fit a `smallint`).
fn milli_column(milli: Milli) -> i16 {
    i16::try_from(milli).unwrap_or(i16::MAX)
}

/// One stored row, as the impact preview reads it (a million of them in a second: no
/// allocation but for custom categories).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredScores {
    /// The job.
    pub job_id: Uuid,
    /// The model's decision.
    pub prohibited: bool,
    /// Rejected whatever the policy says.
    pub listed: bool,
    /// The version that decided it.
    pub policy_version: Option<i32>,
    /// The fixed categories' scores, in the order of [`FIXED_CATEGORIES`].
    pub fixed: [Option<Milli>; 6],
    /// The custom categories' scores, by policy name (`custom.<name>`).
    pub custom: Vec<(String, Milli)>,
}

impl StoredScores {
    /// Every score, by policy category; none when no model ran.
    pub fn scores(&self) -> impl Iterator<Item = (&str, Milli)> + '_ {
        FIXED_CATEGORIES
            .iter()
            .zip(self.fixed)
            .filter_map(|(&name, score)| score.map(|s| (name, s)))
            .chain(self.custom.iter().map(|(name, s)| (name.as_str(), *s)))
    }

    /// Whether a model scored the job.
    pub fn is_scored(&self) -> bool {
        self.fixed.iter().any(Option::is_some) || !self.custom.is_empty()
    }
}

/// The statement [`window`] streams: an account's rows in an id range.
const WINDOW: &str = "SELECT job_id, prohibited, listed, policy_version, harassment, hate, \
                             violence, self_harm, sexual, nsfw, custom \
                      FROM job_scores \
                      WHERE account_id = $1 AND job_id >= $2 AND job_id < $3";

/// Calls `each` with every row of `account` whose job was created in [`from`, `to`), streamed
/// (binary `COPY`), so memory stays flat whatever the window holds.
pub async fn window(
    client: &tokio_postgres::Client,
    account: AccountId,
    from: OffsetDateTime,
    to: OffsetDateTime,
    mut each: impl FnMut(StoredScores),
) -> Result<(), DbError> {
    let statement = WINDOW
        .replace("$1", &format!("'{}'::uuid", account.0))
        .replace("$2", &format!("'{}'::uuid", id_floor(from)))
        .replace("$3", &format!("'{}'::uuid", id_floor(to)));
    let sink = client
        .copy_out(&format!("COPY ({statement}) TO STDOUT (FORMAT binary)"))
        .await?;
    let types = [
        Type::UUID,
        Type::BOOL,
        Type::BOOL,
        Type::INT4,
        Type::INT2,
        Type::INT2,
        Type::INT2,
        Type::INT2,
        Type::INT2,
        Type::INT2,
        Type::JSONB,
    ];
    let rows = BinaryCopyOutStream::new(sink, &types);
    pin_mut!(rows);
    while let Some(row) = rows.try_next().await? {
        let mut fixed = [None; 6];
        for (index, score) in fixed.iter_mut().enumerate() {
            *score = row
                .try_get::<Option<i16>>(4 + index)?
                .map(|milli| u16::try_from(milli).unwrap_or(0));
        }
        let custom = match row.try_get::<Option<Json<BTreeMap<String, u16>>>>(10)? {
            Some(Json(custom)) => custom
                .into_iter()
                .map(|(name, milli)| (format!("{}{name}", crate::policy::CUSTOM_PREFIX), milli))
                .collect(),
            None => Vec::new(),
        };
        each(StoredScores {
            job_id: row.try_get(0)?,
            prohibited: row.try_get(1)?,
            listed: row.try_get(2)?,
            policy_version: row.try_get(3)?,
            fixed,
            custom,
        });
    }
    Ok(())
}

/// The plan Postgres chooses for [`window`]'s statement, as `EXPLAIN` prints it.
pub async fn window_plan(
    client: &impl GenericClient,
    account: AccountId,
    from: OffsetDateTime,
    to: OffsetDateTime,
) -> Result<String, DbError> {
    let rows = client
        .query(
            &format!("EXPLAIN {WINDOW}"),
            &[&account.0, &id_floor(from), &id_floor(to)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n"))
}
