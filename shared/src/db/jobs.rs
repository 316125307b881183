//! The `jobs` table.

use std::collections::HashSet;

use serde::Deserialize;
use time::OffsetDateTime;
use tokio_postgres::{
    types::{Json, ToSql, Type},
    GenericClient as _, Row,
};

use super::{
    audit_events::{self, Actor, Target},
    deliveries::NewDelivery,
    job_scores, partition, review_items, BatchClient, DbError, GenericClient,
};
use crate::{
    clock,
    domain::{
        AccountId, ApiKeyId, AuditAction, ChatMessage, ClaimToken, DecidedBy, DeliveryId,
        FailureCode, Idempotency, JobId, JobReviewState, JobStage, JobStatus, Modality,
        ReviewItemId, ReviewReason, WebhookEvent,
    },
    outcome::JobOutcome,
};

/// A job row as the read endpoints show it.
#[derive(Debug, Clone)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// The stored type (`text`, `image`, `video`, `audio`, or a historical value).
    pub kind: String,
    /// Its status.
    pub status: JobStatus,
    /// Its progress stage.
    pub stage: JobStage,
    /// How many times a worker took it.
    pub attempts: i32,
    /// The decision, once completed.
    pub is_prohibited: Option<bool>,
    /// The rejection reason (only when prohibited).
    pub reason: Option<String>,
    /// Category results, when any ran.
    pub categories: Option<serde_json::Value>,
    /// The built-in models' scores, when a model ran.
    pub scores: Option<serde_json::Value>,
    /// The active policy version that decided it.
    pub policy_version: Option<i32>,
    /// The shadow version's decision, when one ran.
    pub shadow: Option<serde_json::Value>,
    /// The detected language (ISO 639-1) of a text or of an audio job's speech.
    pub language: Option<String>,
    /// The built-in models that scored it (`model_sets.id`).
    pub model_set: Option<String>,
    /// The number of its latest decision (0: the model's).
    pub revision: i32,
    /// Who took its latest decision.
    pub decided_by: DecidedBy,
    /// Its review, if it went to one.
    pub review_state: Option<JobReviewState>,
    /// Why it went to review.
    pub review_reasons: Vec<ReviewReason>,
    /// Failure code, for failed jobs.
    pub error_code: Option<FailureCode>,
    /// Failure message, for failed jobs.
    pub error_message: Option<String>,
    /// When it was submitted.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
    /// When it finished.
    pub completed_at: Option<OffsetDateTime>,
}

const COLUMNS: &str = "id, type, status, stage, attempts, is_prohibited, reason, categories, \
                       scores, policy_version, shadow, language, model_set, revision, \
                       decided_by, review_state, review_reasons, error_code, error_message, \
                       created_at, updated_at, completed_at";

impl Job {
    fn from_row(row: &Row) -> Result<Self, DbError> {
        Ok(Self {
            id: JobId(row.get("id")),
            kind: row.get("type"),
            status: super::parse_word(row, "status")?,
            stage: super::parse_word(row, "stage")?,
            attempts: row.get("attempts"),
            is_prohibited: row.get("is_prohibited"),
            reason: row.get("reason"),
            categories: row.get("categories"),
            scores: row.get("scores"),
            policy_version: row.get("policy_version"),
            shadow: row.get("shadow"),
            language: row.get("language"),
            model_set: row.get("model_set"),
            revision: row.get("revision"),
            decided_by: super::parse_word(row, "decided_by")?,
            review_state: super::parse_optional_word(row, "review_state")?,
            review_reasons: row
                .get::<_, Option<Vec<String>>>("review_reasons")
                .unwrap_or_default()
                .iter()
                .filter_map(|r| r.parse().ok())
                .collect(),
            error_code: super::parse_optional_word(row, "error_code")?,
            error_message: row.get("error_message"),
            created_at: row.get("created_at"),
            updated_at: row.get("updated_at"),
            completed_at: row.get("completed_at"),
        })
    }
}

/// A submission to persist.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The job's id (chosen by the caller so it can be enqueued by id).
    pub id: JobId,
    /// The owning account.
    pub account_id: AccountId,
    /// The key used, if any.
    pub api_key_id: Option<ApiKeyId>,
    /// The modality (its queue).
    pub modality: Modality,
    /// The text (a chat as `role: content` lines) or the media URL.
    pub content: String,
    /// A chat's messages as submitted.
    pub messages: Option<Vec<ChatMessage>>,
    /// The per-request callback URL.
    pub webhook_url: Option<String>,
    /// The client's `Idempotency-Key` and the request's fingerprint, when it sent one.
    pub idempotency: Option<Idempotency>,
}

/// Counter rows per (account, minute or day, type) that concurrent submissions spread over, so
/// two batches of one account rarely wait for each other's commit (usage reads sum them).
const USAGE_SHARDS: i16 = 16;

/// Inserts queued jobs in one statement, each with its row of `open_jobs` marked as enqueued
/// now (the caller enqueues next and calls [`mark_not_enqueued`] for those whose enqueue
/// failed), with their usage counts (`usage_minutes`, `usage_days`) and idempotency keys.
/// Answers, per job in order, whether it was stored.
///
/// A job whose idempotency key its account holds (`idempotency_keys`) is not stored: the
/// caller looks the holder up with [`super::job_keys::holders`]. Concurrent inserts of one key
/// store one job: the second waits for the first to commit and then finds its key held. Keys
/// go in key order and counts in count order, so two batches wait for each other in one
/// order, never in a cycle.
pub async fn insert_many(client: &impl BatchClient, jobs: &[NewJob]) -> Result<Vec<bool>, DbError> {
    let ids: Vec<uuid::Uuid> = jobs.iter().map(|j| j.id.0).collect();
    let accounts: Vec<uuid::Uuid> = jobs.iter().map(|j| j.account_id.0).collect();
    let keys: Vec<Option<uuid::Uuid>> = jobs.iter().map(|j| j.api_key_id.map(|k| k.0)).collect();
    let types: Vec<&str> = jobs.iter().map(|j| j.modality.as_str()).collect();
    let contents: Vec<&str> = jobs.iter().map(|j| j.content.as_str()).collect();
    let messages: Vec<Option<Json<&[ChatMessage]>>> = jobs
        .iter()
        .map(|j| j.messages.as_deref().map(Json))
        .collect();
    let webhooks: Vec<Option<&str>> = jobs.iter().map(|j| j.webhook_url.as_deref()).collect();
    let idempotency_keys: Vec<Option<&str>> = jobs
        .iter()
        .map(|j| j.idempotency.as_ref().map(|k| k.key.as_str()))
        .collect();
    let fingerprints: Vec<Option<&[u8]>> = jobs
        .iter()
        .map(|j| j.idempotency.as_ref().map(|k| &k.fingerprint.0[..]))
        .collect();
    // The batch's shard: any will do, as long as concurrent batches rarely share one (the
    // ids' last bits are random).
    let shard = ids
        .first()
        .map_or(0, |id| (id.as_u128() % USAGE_SHARDS as u128) as i16);
    // Without keys in the batch (most submissions carry none), the statement leaves out the
    // keys' table: less to plan on every call.
    let (keyed, stored_only) = if idempotency_keys.iter().any(Option::is_some) {
        (
            "keyed AS ( \
                 INSERT INTO idempotency_keys (account_id, key, fingerprint, job_id) \
                 SELECT account_id, idempotency_key, request_fingerprint, id FROM input \
                 WHERE idempotency_key IS NOT NULL ORDER BY account_id, idempotency_key \
                 ON CONFLICT DO NOTHING RETURNING job_id),",
            "WHERE idempotency_key IS NULL OR id IN (SELECT job_id FROM keyed)",
        )
    } else {
        ("", "")
    };
    let rows = super::insert_batch(
        client,
        &format!(
            "WITH input AS ( \
                 SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], \
                                      $5::text[], $6::jsonb[], $7::text[], $8::text[], \
                                      $9::bytea[]) \
                     AS j(id, account_id, api_key_id, type, content, messages, webhook_url, \
                          idempotency_key, request_fingerprint)), \
             {keyed} \
             stored AS ( \
                 INSERT INTO jobs (id, account_id, api_key_id, type, content, messages, \
                                   webhook_url) \
                 SELECT id, account_id, api_key_id, type, content, messages, webhook_url \
                 FROM input {stored_only} \
                 RETURNING id, account_id, type, created_at), \
             opened AS ( \
                 INSERT INTO open_jobs (job_id, account_id, type, created_at, enqueued_at) \
                 SELECT id, account_id, type, created_at, now() FROM stored), \
             minutes AS ( \
                 INSERT INTO usage_minutes (account_id, minute, type, shard, count) \
                 SELECT account_id, date_trunc('minute', created_at), type, $10, count(*) \
                 FROM stored GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 \
                 ON CONFLICT (account_id, minute, type, shard) \
                 DO UPDATE SET count = usage_minutes.count + EXCLUDED.count), \
             days AS ( \
                 INSERT INTO usage_days (account_id, day, type, shard, count) \
                 SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, type, $10, count(*) \
                 FROM stored GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 \
                 ON CONFLICT (account_id, day, type, shard) \
                 DO UPDATE SET count = usage_days.count + EXCLUDED.count) \
             SELECT id FROM stored"
        ),
        &[
            (&ids, Type::UUID_ARRAY),
            (&accounts, Type::UUID_ARRAY),
            (&keys, Type::UUID_ARRAY),
            (&types, Type::TEXT_ARRAY),
            (&contents, Type::TEXT_ARRAY),
            (&messages, Type::JSONB_ARRAY),
            (&webhooks, Type::TEXT_ARRAY),
            (&idempotency_keys, Type::TEXT_ARRAY),
            (&fingerprints, Type::BYTEA_ARRAY),
            (&shard, Type::INT2),
        ],
    )
    .await?;
    let stored = rows
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<Result<HashSet<uuid::Uuid>, _>>()?;
    Ok(jobs.iter().map(|j| stored.contains(&j.id.0)).collect())
}

/// Records that the enqueue of jobs `ids` failed, so the relay picks them up first.
pub async fn mark_not_enqueued(client: &impl GenericClient, ids: &[JobId]) -> Result<(), DbError> {
    let ids: Vec<uuid::Uuid> = ids.iter().map(|id| id.0).collect();
    let stmt = client
        .prepare_cached(
            "UPDATE open_jobs SET enqueued_at = NULL WHERE job_id = ANY($1) AND status = 'queued'",
        )
        .await?;
    client.execute(&stmt, &[&ids]).await?;
    Ok(())
}

/// One job of `account`, unless its id is below `floor` (past retention).
pub async fn get(
    client: &impl GenericClient,
    account: AccountId,
    id: JobId,
    floor: uuid::Uuid,
) -> Result<Option<Job>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM jobs WHERE id = $1 AND account_id = $2 AND id >= $3"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&id.0, &account.0, &floor])
        .await?
        .as_ref()
        .map(Job::from_row)
        .transpose()
}

/// Jobs of `account` in `statuses` with ids from `floor` on, oldest first, after the position
/// `after` (`created_at`, id), at most `limit`.
///
/// `jobs` has no index by status (its updates would not be HOT, see V021): open statuses alone
/// (queued, processing: what a client polls for) are found in `open_jobs`, a few rows
/// whatever the account's history; with an ended status the account's jobs are read in order
/// (`jobs_account_created_idx`) and filtered.
pub async fn list(
    client: &impl GenericClient,
    account: AccountId,
    statuses: &[JobStatus],
    after: Option<(OffsetDateTime, JobId)>,
    limit: i64,
    floor: uuid::Uuid,
) -> Result<Vec<Job>, DbError> {
    let statuses: Vec<&str> = statuses.iter().map(|s| s.as_str()).collect();
    let (after_at, after_id) = after.map_or((None, None), |(at, id)| (Some(at), Some(id.0)));
    let open_only = statuses
        .iter()
        .all(|s| [JobStatus::Queued.as_str(), JobStatus::Processing.as_str()].contains(s));
    let open_ids = if open_only {
        "id IN (SELECT job_id FROM open_jobs \
                WHERE account_id = $1 AND status = ANY($2) AND job_id >= $6 \
                  AND ($3::timestamptz IS NULL OR (created_at, job_id) > ($3, $4::uuid)) \
                ORDER BY created_at, job_id LIMIT $5)"
    } else {
        "true"
    };
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM jobs \
             WHERE account_id = $1 AND status = ANY($2) AND id >= $6 AND {open_ids} \
               AND ($3::timestamptz IS NULL OR (created_at, id) > ($3, $4::uuid)) \
             ORDER BY created_at, id LIMIT $5"
        ))
        .await?;
    let rows = client
        .query(
            &stmt,
            &[&account.0, &statuses, &after_at, &after_id, &limit, &floor],
        )
        .await?;
    rows.iter().map(Job::from_row).collect()
}

/// What the dashboard's job list is filtered by; `None` filters nothing.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// Only jobs with ids from this on (the retention floor).
    pub floor: uuid::Uuid,
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only jobs of this stored type.
    pub kind: Option<String>,
    /// Only jobs created at or after this.
    pub from: Option<OffsetDateTime>,
    /// Only jobs created before this.
    pub until: Option<OffsetDateTime>,
}

/// A position in the dashboard's list: the last (`created_at`, id) of the previous page.
pub type Position = (OffsetDateTime, JobId);

/// Jobs of `account` matching `search`, newest first, after `after`, at most `limit`.
///
/// Only the filters given reach the statement, so each page is read in order from an index
/// and stops after `limit` rows: `jobs_account_type_created_idx` with a type,
/// `jobs_account_created_idx` (backwards) without; a date filter narrows that scan, and an
/// ended status filters it (`jobs` has no index by status, see V021). An open status is read
/// from `open_jobs_account_idx` (backwards) instead, each job then by its id.
/// [`search_plan`] shows the plan.
pub async fn search(
    client: &impl GenericClient,
    account: AccountId,
    search: &Search,
    after: Option<Position>,
    limit: i64,
) -> Result<Vec<Job>, DbError> {
    let page = SearchPage::new(account, search, after, limit);
    let stmt = client.prepare_cached(&page.sql("")).await?;
    let rows = client.query(&stmt, &page.params()).await?;
    rows.iter().map(Job::from_row).collect()
}

/// The plan Postgres chooses for a page of [`search`], as `EXPLAIN` prints it.
pub async fn search_plan(
    client: &impl GenericClient,
    account: AccountId,
    search: &Search,
    after: Option<Position>,
    limit: i64,
) -> Result<String, DbError> {
    let page = SearchPage::new(account, search, after, limit);
    let rows = client.query(&page.sql("EXPLAIN "), &page.params()).await?;
    Ok(rows
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The statement of one page of [`search`] and its parameters.
struct SearchPage {
    params: Vec<Box<dyn ToSql + Sync + Send>>,
    conditions: String,
    /// Whether it asks for an open status (queued, processing).
    open: bool,
}

impl SearchPage {
    fn new(account: AccountId, search: &Search, after: Option<Position>, limit: i64) -> Self {
        let mut params: Vec<Box<dyn ToSql + Sync + Send>> =
            vec![Box::new(account.0), Box::new(limit)];
        // Each condition names the job's id `{id}`: `id` in `jobs`, `job_id` in `open_jobs`.
        let mut conditions = vec!["account_id = $1".to_owned()];
        let mut add = |param: Box<dyn ToSql + Sync + Send>, condition: &str| {
            params.push(param);
            conditions.push(condition.replace('?', &format!("${}", params.len())));
        };
        if let Some(status) = search.status {
            add(Box::new(status.as_str()), "status = ?");
        }
        if let Some(kind) = &search.kind {
            add(Box::new(kind.clone()), "type = ?");
        }
        // The ids bound the dates too (a day wider: ids are made by the api's clock,
        // created_at by Postgres's), so only the partitions of the window are read.
        let floor = search
            .from
            .map(|from| crate::domain::id_floor(from - time::Duration::DAY))
            .map_or(search.floor, |from| from.max(search.floor));
        add(Box::new(floor), "{id} >= ?");
        if let Some(from) = search.from {
            add(Box::new(from), "created_at >= ?");
        }
        if let Some(until) = search.until {
            add(Box::new(until), "created_at < ?");
            add(
                Box::new(crate::domain::id_floor(until + time::Duration::DAY)),
                "{id} < ?",
            );
        }
        if let Some((at, id)) = after {
            params.push(Box::new(at));
            params.push(Box::new(id.0));
            conditions.push(format!(
                "(created_at, {{id}}) < (${}, ${})",
                params.len() - 1,
                params.len()
            ));
        }
        Self {
            params,
            conditions: conditions.join(" AND "),
            open: matches!(
                search.status,
                Some(JobStatus::Queued | JobStatus::Processing)
            ),
        }
    }

    fn sql(&self, prefix: &str) -> String {
        let conditions = self.conditions.replace("{id}", "id");
        if !self.open {
            return format!(
                "{prefix}SELECT {COLUMNS} FROM jobs WHERE {conditions} \
                 ORDER BY created_at DESC, id DESC LIMIT $2"
            );
        }
        // An open status: the page is read in order from the account's rows of `open_jobs`
        // (a few, whatever its history), each job by its id. `jobs` has no index by status.
        let open_conditions = self.conditions.replace("{id}", "job_id");
        format!(
            "{prefix}SELECT {COLUMNS} FROM jobs \
             JOIN (SELECT job_id AS open_id, created_at AS open_at FROM open_jobs \
                   WHERE {open_conditions}) AS open ON jobs.id = open.open_id \
             WHERE {conditions} ORDER BY open.open_at DESC, open.open_id DESC LIMIT $2"
        )
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

/// What [`finish_many`] did with one result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The job ended with it (or had, by this very token: a result run again after its reply
    /// was lost answers as the first run did).
    Done(Finished),
    /// The job had already ended by another token: a duplicate, nothing written.
    Ended,
    /// The account's settings changed since the job was claimed (its stamp moved: a policy
    /// version was activated, a category or term changed): nothing written; decide it again
    /// with the settings now in force.
    Stale,
}

/// A job that ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The delivery made for it, when the job had a target.
    pub delivery_id: Option<DeliveryId>,
    /// From submission to this result.
    pub since_submitted: time::Duration,
}

/// A job's result, written by the delivery holding `token`: see [`finish_many`].
#[derive(Debug, Clone)]
pub struct JobResult {
    /// The job.
    pub id: JobId,
    /// The writer's claim token (a fresh one when no claim was made, as for a job out of tries).
    pub token: ClaimToken,
    /// The account's settings stamp the outcome was decided under; `None` when no setting of
    /// the account went into it (a failure).
    pub stamp: Option<i64>,
    /// How it ended.
    pub outcome: JobOutcome,
}

/// Ends each job of `results` that is not yet terminal with its outcome, and stores its
/// webhook delivery: to the job's own `webhook_url`, else to the account's global URL at this
/// moment, else none; and, for a decision, its row of scores (`job_scores`). Run it in the
/// transaction that writes the results, so each result and its delivery land together or not
/// at all. One answer per result, in order (see [`Finish`]): a job run twice completes once,
/// also when both runs are in one call, and a decision taken under a settings stamp the
/// account no longer has is refused, so every job completed after a settings change commits
/// is decided by the new settings. An ended job leaves `open_jobs`.
pub async fn finish_many(
    client: &impl BatchClient,
    results: &[JobResult],
) -> Result<Vec<Finish>, DbError> {
    let mut columns = FinishColumns::default();
    for result in results {
        columns.push(result);
    }
    // The month's partition when it surely holds the jobs (see `partition`); through the
    // table, `jobs.id = ANY($1)` repeats the join's ids as an array, so Postgres plans only
    // the partitions holding them (the join alone has it plan every partition). `NOT IN` the
    // terminal states, not `IN` the others: from that Postgres may combine the partial
    // indexes of queued and processing jobs, which reads every job in either state per call
    // when statistics lag behind a growing queue.
    let table = partition::table_of("jobs", columns.ids.iter().copied(), clock::now());
    let rows = client
        .unnamed()
        .query_typed(
            &format!(
            "WITH ended AS ( \
             UPDATE \"{table}\" AS jobs SET status = r.status, stage = r.stage, is_prohibited = r.prohibited, \
                    reason = r.reason, categories = r.categories, scores = r.scores, \
                    nsfw_checked = r.nsfw, error_code = r.code, error_message = r.message, \
                    claim_token = r.token, policy_version = r.policy_version, \
                    shadow = r.shadow, language = r.language, model_set = r.model_set, \
                    review_state = CASE WHEN r.review <> '' THEN 'pending' END, \
                    review_reasons = CASE WHEN r.review <> '' \
                                          THEN string_to_array(r.review, ',') END, \
                    completed_at = now(), updated_at = now() \
             FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bool[], $5::text[], \
                         $6::jsonb[], $7::bool[], $8::text[], $9::text[], $10::uuid[], \
                         $11::jsonb[], $12::int8[], $13::int4[], $14::jsonb[], $15::text[], \
                         $16::text[], $17::text[]) \
                  WITH ORDINALITY AS r(id, status, stage, prohibited, reason, categories, nsfw, \
                                       code, message, token, scores, stamp, policy_version, \
                                       shadow, language, model_set, review, ord), \
                  accounts a \
             WHERE jobs.id = r.id AND jobs.id = ANY($1) \
               AND jobs.status NOT IN ('completed', 'failed') \
               AND a.id = jobs.account_id AND (r.stamp IS NULL OR a.settings_stamp = r.stamp) \
             RETURNING r.ord, jobs.id, jobs.account_id, jobs.type, jobs.created_at, \
                       jobs.completed_at, \
                       coalesce(jobs.webhook_url, \
                                (SELECT url FROM webhook_endpoints e \
                                 WHERE e.account_id = jobs.account_id)) AS target, \
                       jobs.webhook_url IS NULL AS to_account), \
             closed AS (DELETE FROM open_jobs USING ended WHERE open_jobs.job_id = ended.id) \
             SELECT * FROM ended"
            ),
            &[
                (&columns.ids, Type::UUID_ARRAY),
                (&columns.statuses, Type::TEXT_ARRAY),
                (&columns.stages, Type::TEXT_ARRAY),
                (&columns.prohibited, Type::BOOL_ARRAY),
                (&columns.reasons, Type::TEXT_ARRAY),
                (&columns.categories, Type::JSONB_ARRAY),
                (&columns.nsfw, Type::BOOL_ARRAY),
                (&columns.codes, Type::TEXT_ARRAY),
                (&columns.messages, Type::TEXT_ARRAY),
                (&columns.tokens, Type::UUID_ARRAY),
                (&columns.scores, Type::JSONB_ARRAY),
                (&columns.stamps, Type::INT8_ARRAY),
                (&columns.policy_versions, Type::INT4_ARRAY),
                (&columns.shadows, Type::JSONB_ARRAY),
                (&columns.languages, Type::TEXT_ARRAY),
                (&columns.model_sets, Type::TEXT_ARRAY),
                (&columns.reviews, Type::TEXT_ARRAY),
            ],
        )
        .await?;
    let mut finished: Vec<Option<Finish>> = vec![None; results.len()];
    let mut deliveries = Vec::new();
    let mut scored = Vec::new();
    let mut reviews = Vec::new();
    for row in &rows {
        let Some(index) = ordinal(row.get("ord"), results.len()) else {
            continue;
        };
        let JobResult { id, outcome, .. } = &results[index];
        let account = AccountId(row.get("account_id"));
        let completed_at: OffsetDateTime = row.get("completed_at");
        let since_submitted = completed_at - row.get::<_, OffsetDateTime>("created_at");
        let delivery_id = row.get::<_, Option<String>>("target").map(|target| {
            let delivery_id = DeliveryId::new();
            deliveries.push(NewDelivery {
                id: delivery_id,
                event: WebhookEvent::JobCompleted,
                job_id: Some(*id),
                account_id: account,
                target_url: target,
                body: crate::webhook_body::body(*id, outcome, completed_at, delivery_id),
                to_account_url: row.get("to_account"),
            });
            delivery_id
        });
        if let JobOutcome::Decided(decision) = outcome {
            scored.push(job_scores::NewScores {
                job_id: *id,
                account_id: account,
                decision,
            });
            if !decision.review.is_empty() {
                reviews.push(review_items::NewItem {
                    id: ReviewItemId::new(),
                    job_id: *id,
                    account_id: account,
                    job_type: row.get("type"),
                    reasons: decision.review.clone(),
                    appeal_id: None,
                });
            }
        }
        finished[index] = Some(Finish::Done(Finished {
            delivery_id,
            since_submitted,
        }));
    }
    super::deliveries::insert_many(client, &deliveries).await?;
    job_scores::insert_many(client, &scored).await?;
    review_items::insert_many(client, &reviews).await?;
    let unanswered: Vec<usize> = (0..results.len())
        .filter(|&i| finished[i].is_none())
        .collect();
    if !unanswered.is_empty() {
        for (index, again) in finished_before(client, results, &unanswered).await? {
            finished[index] = Some(again);
        }
        let unanswered: Vec<usize> = unanswered
            .into_iter()
            .filter(|&i| finished[i].is_none() && results[i].stamp.is_some())
            .collect();
        for index in still_held(client, results, &unanswered).await? {
            finished[index] = Some(Finish::Stale);
        }
    }
    Ok(finished
        .into_iter()
        .map(|f| f.unwrap_or(Finish::Ended))
        .collect())
}

/// Of the results at `indexes`, those whose job this very token already ended (a result run
/// again after its reply was lost): their index and what the first run did.
async fn finished_before(
    client: &impl BatchClient,
    results: &[JobResult],
    indexes: &[usize],
) -> Result<Vec<(usize, Finish)>, DbError> {
    let ids: Vec<uuid::Uuid> = indexes.iter().map(|&i| results[i].id.0).collect();
    let tokens: Vec<uuid::Uuid> = indexes.iter().map(|&i| results[i].token.0).collect();
    let rows = client
        .unnamed()
        .query_typed(
            "SELECT r.ord, j.created_at, j.completed_at, d.id AS delivery_id
             FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS r(id, token, ord)
             JOIN jobs j ON j.id = r.id AND j.claim_token = r.token
                        AND j.status IN ('completed', 'failed')
             LEFT JOIN deliveries d ON d.job_id = j.id AND d.event = 'job.completed'",
            &[(&ids, Type::UUID_ARRAY), (&tokens, Type::UUID_ARRAY)],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|row| {
            let index = ordinal(row.get("ord"), indexes.len()).map(|i| indexes[i])?;
            let completed_at: OffsetDateTime = row.get("completed_at");
            Some((
                index,
                Finish::Done(Finished {
                    delivery_id: row
                        .get::<_, Option<uuid::Uuid>>("delivery_id")
                        .map(DeliveryId),
                    since_submitted: completed_at - row.get::<_, OffsetDateTime>("created_at"),
                }),
            ))
        })
        .collect())
}

/// Of the results at `indexes`, those whose job is still `processing` under their token: the
/// account's stamp moved since their claim.
async fn still_held(
    client: &impl BatchClient,
    results: &[JobResult],
    indexes: &[usize],
) -> Result<Vec<usize>, DbError> {
    if indexes.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<uuid::Uuid> = indexes.iter().map(|&i| results[i].id.0).collect();
    let tokens: Vec<uuid::Uuid> = indexes.iter().map(|&i| results[i].token.0).collect();
    let rows = client
        .unnamed()
        .query_typed(
            "SELECT r.ord FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS r(id, token, ord)
             JOIN jobs j ON j.id = r.id AND j.claim_token = r.token AND j.status = 'processing'",
            &[(&ids, Type::UUID_ARRAY), (&tokens, Type::UUID_ARRAY)],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|row| ordinal(row.get("ord"), indexes.len()).map(|i| indexes[i]))
        .collect())
}

/// [`finish_many`]'s parameters, one array per column.
#[derive(Default)]
struct FinishColumns<'a> {
    ids: Vec<uuid::Uuid>,
    statuses: Vec<&'static str>,
    stages: Vec<&'static str>,
    prohibited: Vec<Option<bool>>,
    reasons: Vec<Option<&'a str>>,
    categories: Vec<Option<&'a serde_json::Value>>,
    scores: Vec<Option<serde_json::Value>>,
    nsfw: Vec<Option<bool>>,
    codes: Vec<Option<&'static str>>,
    messages: Vec<Option<&'a str>>,
    tokens: Vec<uuid::Uuid>,
    stamps: Vec<Option<i64>>,
    policy_versions: Vec<Option<i32>>,
    shadows: Vec<Option<serde_json::Value>>,
    languages: Vec<Option<&'a str>>,
    model_sets: Vec<Option<&'a str>>,
    /// Each job's review reasons joined by commas (empty: no review).
    reviews: Vec<String>,
}

impl<'a> FinishColumns<'a> {
    fn push(&mut self, result: &'a JobResult) {
        self.ids.push(result.id.0);
        self.tokens.push(result.token.0);
        self.stamps.push(result.stamp);
        match &result.outcome {
            JobOutcome::Decided(decision) => {
                self.statuses.push(JobStatus::Completed.as_str());
                self.stages.push(JobStage::Done.as_str());
                self.prohibited.push(Some(decision.is_prohibited));
                self.reasons.push(
                    decision
                        .reason
                        .as_deref()
                        .filter(|_| decision.is_prohibited),
                );
                self.categories.push(decision.categories.as_ref());
                self.scores.push(decision.scores_json());
                self.nsfw.push(decision.nsfw_checked);
                self.codes.push(None);
                self.messages.push(None);
                self.policy_versions.push(decision.policy_version);
                self.shadows.push(
                    decision
                        .shadow
                        .as_ref()
                        .and_then(|shadow| serde_json::to_value(shadow).ok()),
                );
                self.languages.push(decision.language.as_deref());
                self.model_sets.push(decision.model_set.as_deref());
                self.reviews.push(
                    decision
                        .review
                        .iter()
                        .map(|r| r.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                );
            }
            JobOutcome::Failed { code, message } => {
                self.statuses.push(JobStatus::Failed.as_str());
                self.stages.push(JobStage::Failed.as_str());
                self.prohibited.push(None);
                self.reasons.push(None);
                self.categories.push(None);
                self.scores.push(None);
                self.nsfw.push(None);
                self.codes.push(Some(code.as_str()));
                self.messages.push(Some(message));
                self.policy_versions.push(None);
                self.shadows.push(None);
                self.languages.push(None);
                self.model_sets.push(None);
                self.reviews.push(String::new());
            }
        }
    }
}

/// The index of the request a row answers, from its 1-based `WITH ORDINALITY` number.
fn ordinal(ord: i64, len: usize) -> Option<usize> {
    usize::try_from(ord)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .filter(|&i| i < len)
}

/// A job a worker has taken: what it needs to classify it, with the account's policy stamp.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    /// The job.
    pub id: JobId,
    /// Its account.
    pub account_id: AccountId,
    /// The text (a chat as `role: content` lines) or the media URL; `None` once erased.
    pub content: Option<String>,
    /// A chat's messages as stored; read them with [`ClaimedJob::chat_messages`].
    pub messages: Option<serde_json::Value>,
    /// Tries so far, this one included.
    pub attempts: i32,
    /// Whether the account runs the NSFW check.
    pub nsfw_check: bool,
    /// The account's policy version (bumped by every change to its categories or terms).
    pub settings_stamp: i64,
}

impl ClaimedJob {
    /// A chat's messages (`None` for anything but a chat). An error when the stored value is
    /// not a list of [`ChatMessage`]s: this job can never be read, whereas the claim that
    /// loaded it and the other jobs of its batch stand.
    pub fn chat_messages(&self) -> Result<Option<Vec<ChatMessage>>, serde_json::Error> {
        self.messages
            .as_ref()
            .map(Vec::<ChatMessage>::deserialize)
            .transpose()
    }
}

/// What [`claim_many`] did.
#[derive(Debug, Clone)]
pub enum Claim {
    /// The job moved to `processing` with one more attempt (or had already, by this very
    /// claim, whose reply was lost).
    Claimed(ClaimedJob),
    /// The job had used all `max_tries`: end it as failed with `INTERNAL`.
    Exhausted,
    /// The job was already taken or finished: a duplicate delivery.
    Duplicate,
}

/// One job to claim: see [`claim_many`].
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The job.
    pub id: JobId,
    /// This delivery's token, written on the job as its claimant.
    pub token: ClaimToken,
    /// Whether an earlier delivery was lost, so the job may be left `processing`.
    pub redelivery: bool,
    /// The stage it starts in.
    pub first_stage: JobStage,
}

/// Claims each requested job: a queued job (or, on a redelivery, one a lost worker left
/// `processing`) moves to `processing` in its first stage with one more attempt, the request's
/// token as its claimant and a lease of `lease` (renewed, and rescued once it runs out, by
/// `db::job_leases`). One that has had `max_tries` already is left as it is and answered
/// [`Claim::Exhausted`]: the caller ends it with [`finish_many`], so its failure is delivered
/// like any other. A job this very token holds already (the claim ran again after its reply
/// was lost) is answered [`Claim::Claimed`] again, without another attempt. Anything else is a
/// duplicate, and so is every request for a job but the first when one call asks for a job
/// twice. One answer per request, in order.
///
/// The claim commits without waiting for the write-ahead log to reach disk (or a synchronous
/// standby): the statement sets `synchronous_commit` off for its own transaction
/// (`set_config(..., true)`, which works behind PgBouncer in transaction mode, where a
/// session setting would not). A crash may lose a claim, never corrupt anything, and only
/// together with everything committed after it (the log is flushed in order, and the job's
/// result waits for its flush), so a lost claim is a job queued again as if its worker had
/// died. Run it on its own, not inside a transaction of the caller's, whose commit it would
/// make unflushed too.
pub async fn claim_many(
    client: &impl BatchClient,
    requests: &[ClaimRequest],
    max_tries: i32,
    lease: std::time::Duration,
) -> Result<Vec<Claim>, DbError> {
    let ids: Vec<uuid::Uuid> = requests.iter().map(|r| r.id.0).collect();
    let tokens: Vec<uuid::Uuid> = requests.iter().map(|r| r.token.0).collect();
    let redeliveries: Vec<bool> = requests.iter().map(|r| r.redelivery).collect();
    let stages: Vec<&str> = requests.iter().map(|r| r.first_stage.as_str()).collect();
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let params: [(&(dyn ToSql + Sync), Type); 6] = [
        (&max_tries, Type::INT4),
        (&ids, Type::UUID_ARRAY),
        (&redeliveries, Type::BOOL_ARRAY),
        (&stages, Type::TEXT_ARRAY),
        (&tokens, Type::UUID_ARRAY),
        (&lease_ms, Type::INT8),
    ];
    // The month's partition when it surely holds the jobs (see `partition`).
    let table = partition::table_of("jobs", ids.iter().copied(), clock::now());
    let rows = client
        .unnamed()
        .query_typed(&claim_sql(&table), &params)
        .await?;
    let mut claims = vec![Claim::Duplicate; requests.len()];
    for row in rows {
        let Some(index) = ordinal(row.get("ord"), requests.len()) else {
            continue;
        };
        claims[index] = Claim::Claimed(ClaimedJob {
            id: requests[index].id,
            account_id: AccountId(row.get("account_id")),
            content: row.get("content"),
            messages: row.get("messages"),
            attempts: row.get("attempts"),
            nsfw_check: row.get("nsfw_check"),
            settings_stamp: row.get("settings_stamp"),
        });
    }
    let unanswered: Vec<usize> = (0..requests.len())
        .filter(|&i| matches!(claims[i], Claim::Duplicate))
        .collect();
    if unanswered.is_empty() {
        return Ok(claims);
    }
    // Rare (duplicates and jobs out of tries): which of the rest are out of tries.
    let ids: Vec<uuid::Uuid> = unanswered.iter().map(|&i| requests[i].id.0).collect();
    let redeliveries: Vec<bool> = unanswered.iter().map(|&i| requests[i].redelivery).collect();
    let exhausted = client
        .unnamed()
        .query_typed(
            "SELECT r.ord FROM unnest($2::uuid[], $3::bool[]) WITH ORDINALITY AS r(id, redelivery, ord)
             JOIN LATERAL (SELECT status, attempts FROM jobs WHERE jobs.id = r.id) j ON true
             WHERE j.attempts >= $1
               AND (j.status = 'queued' OR (j.status = 'processing' AND r.redelivery))",
            &[
                (&max_tries, Type::INT4),
                (&ids, Type::UUID_ARRAY),
                (&redeliveries, Type::BOOL_ARRAY),
            ],
        )
        .await?;
    // A job claimed in this call, or named twice, is answered once.
    let mut seen: std::collections::HashSet<JobId> = claims
        .iter()
        .filter_map(|c| match c {
            Claim::Claimed(job) => Some(job.id),
            _ => None,
        })
        .collect();
    for row in exhausted {
        let Some(index) = ordinal(row.get("ord"), unanswered.len()).map(|i| unanswered[i]) else {
            continue;
        };
        if seen.insert(requests[index].id) {
            claims[index] = Claim::Exhausted;
        }
    }
    Ok(claims)
}

/// The claim's statement on `table` (`jobs` or one of its partitions).
fn claim_sql(table: &str) -> String {
    format!(
        "WITH claimed AS (
         UPDATE \"{table}\" AS jobs SET status = 'processing', stage = r.stage,
                             attempts = CASE WHEN jobs.status = 'processing'
                                              AND jobs.claim_token = r.token
                                             THEN attempts ELSE attempts + 1 END,
                             claim_token = r.token,
                             updated_at = now()
             FROM unnest($2::uuid[], $3::bool[], $4::text[], $5::uuid[])
                      WITH ORDINALITY AS r(id, redelivery, stage, token, ord),
                  accounts a,
                  -- Every row updated joins this one, so the setting is made before the
                  -- first write; it lasts until this statement's own commit.
                  (SELECT set_config('synchronous_commit', 'off', true)) AS unflushed
             -- The ids again as an array: Postgres plans only the partitions holding them
             -- (the join alone has it plan every partition, and prune them as it runs).
             WHERE jobs.id = r.id AND jobs.id = ANY($2) AND a.id = jobs.account_id
               -- A CASE, not status comparisons joined by OR: from those Postgres may
               -- combine the partial indexes of queued and processing jobs (statistics lag
               -- behind a growing queue), which reads every job in either state per claim.
               AND CASE jobs.status
                       WHEN 'queued' THEN jobs.attempts < $1
                       WHEN 'processing' THEN jobs.claim_token = r.token
                                              OR (jobs.attempts < $1 AND r.redelivery)
                       ELSE false
                   END
             RETURNING r.ord, jobs.id, r.token, jobs.account_id, jobs.content, jobs.messages,
                       jobs.attempts, a.nsfw_check, a.settings_stamp),
         -- The lease, beside the job's row: no index of `jobs` holds what a claim changes,
         -- so the update above is HOT (V021).
         leased AS (
             UPDATE open_jobs SET status = 'processing', claim_token = claimed.token,
                                  locked_until = now() + $6 * interval '1 millisecond'
             FROM claimed WHERE open_jobs.job_id = claimed.id)
         SELECT * FROM claimed"
    )
}

/// One job of `account` with an id from `floor` on, locked until the transaction ends (its
/// review, appeals and content change one at a time).
pub async fn lock(
    client: &impl GenericClient,
    account: AccountId,
    id: JobId,
    floor: uuid::Uuid,
) -> Result<Option<Job>, DbError> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM jobs WHERE id = $1 AND account_id = $2 AND id >= $3 \
             FOR UPDATE"
        ))
        .await?;
    client
        .query_opt(&stmt, &[&id.0, &account.0, &floor])
        .await?
        .as_ref()
        .map(Job::from_row)
        .transpose()
}

/// Records that job `id` has an open review (`pending`) or none left (`decided`), for
/// `reasons`.
pub async fn set_review(
    client: &impl GenericClient,
    id: JobId,
    pending: bool,
    reasons: &[ReviewReason],
) -> Result<(), DbError> {
    let reasons: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
    let state = if pending {
        JobReviewState::Pending
    } else {
        JobReviewState::Decided
    };
    let stmt = client
        .prepare_cached(
            "UPDATE jobs SET review_state = $2, review_reasons = $3, updated_at = now() \
             WHERE id = $1",
        )
        .await?;
    client
        .execute(&stmt, &[&id.0, &state.as_str(), &reasons])
        .await?;
    Ok(())
}

/// A human decision written on the job row.
#[derive(Debug, Clone)]
pub struct Revised<'a> {
    /// The new revision.
    pub revision: i32,
    /// `review` or `appeal`.
    pub decided_by: DecidedBy,
    /// Whether it is rejected.
    pub is_prohibited: bool,
    /// Why, when it is.
    pub reason: Option<&'a str>,
    /// Its categories.
    pub categories: Option<&'a serde_json::Value>,
    /// Whether another review of the job is still open.
    pub review_pending: bool,
}

/// Writes `revised` on job `id`: the row always holds the latest decision.
pub async fn revise(
    client: &impl GenericClient,
    id: JobId,
    revised: &Revised<'_>,
) -> Result<(), DbError> {
    let state = if revised.review_pending {
        JobReviewState::Pending
    } else {
        JobReviewState::Decided
    };
    let stmt = client
        .prepare_cached(
            "UPDATE jobs SET revision = $2, decided_by = $3, is_prohibited = $4, reason = $5, \
                    categories = $6, review_state = $7, updated_at = now() \
             WHERE id = $1",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &id.0,
                &revised.revision,
                &revised.decided_by.as_str(),
                &revised.is_prohibited,
                &revised.reason,
                &revised.categories.map(Json),
                &state.as_str(),
            ],
        )
        .await?;
    Ok(())
}

/// Where a job's later webhooks go: its own `webhook_url`, else the account's URL now; and
/// whether that is the account's URL.
pub async fn target(
    client: &impl GenericClient,
    id: JobId,
) -> Result<Option<(String, bool)>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT coalesce(j.webhook_url, \
                             (SELECT url FROM webhook_endpoints e WHERE e.account_id = j.account_id)), \
                    j.webhook_url IS NULL \
             FROM jobs j WHERE j.id = $1",
        )
        .await?;
    Ok(client.query_opt(&stmt, &[&id.0]).await?.and_then(|row| {
        row.get::<_, Option<String>>(0)
            .map(|target| (target, row.get(1)))
    }))
}

/// What was submitted of one job of `account`: the text (a chat as `role: content` lines) or
/// the media URL (`None` once erased), and a chat's messages; `None` for no such job.
pub async fn content(
    client: &impl GenericClient,
    account: AccountId,
    id: JobId,
    floor: uuid::Uuid,
) -> Result<Option<(Option<String>, Option<serde_json::Value>)>, DbError> {
    let stmt = client
        .prepare_cached(
            "SELECT content, messages FROM jobs WHERE id = $1 AND account_id = $2 AND id >= $3",
        )
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id.0, &account.0, &floor])
        .await?
        .map(|row| (row.get(0), row.get(1))))
}

/// Erases the content of `account`'s job `id` now (text, chat messages, media URL), recording
/// `job.content_erased` by `actor` when there was content to erase: `false` when there is no
/// such job (or it is past retention, below `floor`). Erasing twice changes nothing the
/// second time. A job erased before it was classified fails with `CONTENT_ERASED`.
pub async fn erase_content(
    client: &impl GenericClient,
    actor: Actor,
    account: AccountId,
    id: JobId,
    floor: uuid::Uuid,
) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH job AS (SELECT id, content_erased_at IS NULL AS held FROM jobs \
                          WHERE id = $1 AND account_id = $2 AND id >= $3 FOR UPDATE), \
                  erased AS (UPDATE jobs SET content = NULL, messages = NULL, \
                                             content_erased_at = now() \
                             FROM job WHERE jobs.id = job.id AND job.held \
                             RETURNING jobs.id) \
             SELECT EXISTS (SELECT 1 FROM job), EXISTS (SELECT 1 FROM erased)",
        )
        .await?;
    let row = client
        .query_one(&stmt, &[&id.0, &account.0, &floor])
        .await?;
    let (found, erased): (bool, bool) = (row.get(0), row.get(1));
    if erased {
        audit_events::record(
            client,
            account,
            actor,
            AuditAction::JobContentErased,
            &Target::new("job", id),
            serde_json::json!({}),
        )
        .await?;
    }
    Ok(found)
}

/// Moves a `processing` job to `stage` (`fetching`, `transcribing`, `classifying`).
pub async fn set_stage(
    client: &impl GenericClient,
    id: JobId,
    stage: JobStage,
) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(
            "UPDATE jobs SET stage = $2, updated_at = now()
             WHERE id = $1 AND status = 'processing'",
        )
        .await?;
    client.execute(&stmt, &[&id.0, &stage.as_str()]).await?;
    Ok(())
}

/// Gives a `processing` job that `token` holds back to the queue after a transient failure:
/// it becomes `queued` again, marked as enqueued now, so the relay puts it back on the queue
/// once its grace time has passed (the retry's backoff). `false` when the job was no longer
/// processing under this token (it was rescued, or another delivery took it over).
pub async fn requeue(
    client: &impl GenericClient,
    id: JobId,
    token: ClaimToken,
) -> Result<bool, DbError> {
    let stmt = client
        .prepare_cached(
            "WITH requeued AS (
                 UPDATE jobs SET status = 'queued', stage = 'queued', claim_token = NULL,
                                 updated_at = now()
                 WHERE id = $1 AND status = 'processing' AND claim_token = $2 RETURNING id)
             UPDATE open_jobs SET status = 'queued', enqueued_at = now(), claim_token = NULL,
                                  locked_until = NULL
             FROM requeued WHERE open_jobs.job_id = requeued.id",
        )
        .await?;
    Ok(client.execute(&stmt, &[&id.0, &token.0]).await? == 1)
}
