//! The `model_sets` table: the built-in model files a worker loaded, by their hashes; a job's
//! `model_set` names one.

use std::collections::BTreeMap;

use tokio_postgres::types::Json;

use super::{DbError, GenericClient};

/// Records the set `id` of `models` (model name to the hash of its files), once.
pub async fn record(
    client: &impl GenericClient,
    id: &str,
    models: &BTreeMap<String, String>,
) -> Result<(), DbError> {
    let stmt = client
        .prepare_cached(
            "INSERT INTO model_sets (id, models) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
        )
        .await?;
    client.execute(&stmt, &[&id, &Json(models)]).await?;
    Ok(())
}

/// The models of set `id`, if it was recorded.
pub async fn get(
    client: &impl GenericClient,
    id: &str,
) -> Result<Option<BTreeMap<String, String>>, DbError> {
    let stmt = client
        .prepare_cached("SELECT models FROM model_sets WHERE id = $1")
        .await?;
    Ok(client
        .query_opt(&stmt, &[&id])
        .await?
        .map(|row| row.get::<_, Json<BTreeMap<String, String>>>(0).0))
}
