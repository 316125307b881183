//! `GET /health` and `GET /metrics`.

use std::{future::Future, time::Duration};

use actix_web::{web, HttpResponse};
use moderation_shared::telemetry;
use serde_json::json;

use crate::state::AppState;

/// The most a single dependency check may take; the whole answer comes within it.
const CHECK_DEADLINE: Duration = Duration::from_millis(1500);

/// `GET /health`: 200 `ok` when Postgres and Redis answer, else 503 `degraded` with the
/// failing check marked `error`.
pub async fn health(state: web::Data<AppState>) -> HttpResponse {
    let postgres = check("postgres", async {
        let client = state.pool.get().await.map_err(anyhow::Error::from)?;
        client
            .simple_query("SELECT 1")
            .await
            .map_err(anyhow::Error::from)?;
        Ok(())
    });
    let redis = check("redis", async {
        state.redis.ping().await.map_err(anyhow::Error::from)
    });
    let (postgres, redis) = futures_util::join!(postgres, redis);
    let healthy = postgres && redis;
    let label = |ok: bool| if ok { "ok" } else { "error" };
    let body = json!({
        "status": if healthy { "ok" } else { "degraded" },
        "checks": { "postgres": label(postgres), "redis": label(redis) },
    });
    if healthy {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

async fn check(dependency: &'static str, probe: impl Future<Output = anyhow::Result<()>>) -> bool {
    let outcome = match tokio::time::timeout(CHECK_DEADLINE, probe).await {
        Ok(Ok(())) => "ok",
        Ok(Err(err)) => {
            tracing::warn!(dependency, error = %err, "Health check failed");
            "error"
        }
        Err(_) => {
            tracing::warn!(dependency, "Health check timed out");
            "timeout"
        }
    };
    metrics::counter!(telemetry::DEPENDENCY_CHECKS_TOTAL, "dependency" => dependency, "outcome" => outcome)
        .increment(1);
    outcome == "ok"
}

/// `GET /metrics`: Prometheus text.
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    telemetry::record_pool_use(&state.pool);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
