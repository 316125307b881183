//! `GET /health` and `GET /metrics`.

use std::{future::Future, time::Duration};

use actix_web::{web, HttpResponse};
use moderation_shared::telemetry;
use serde::Serialize;
use utoipa::ToSchema;

use crate::state::AppState;

/// The most a single dependency check may take; the whole answer comes within it.
const CHECK_DEADLINE: Duration = Duration::from_millis(1500);

/// The health answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` or `degraded`.
    #[schema(example = "ok")]
    status: &'static str,
    /// Each dependency's check.
    checks: HealthChecks,
}

/// `ok` or `error` for each dependency.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthChecks {
    /// Postgres.
    postgres: &'static str,
    /// Redis.
    redis: &'static str,
}

/// `GET /health`: 200 `ok` when Postgres and Redis answer, else 503 `degraded` with the
/// failing check marked `error`.
#[utoipa::path(get, path = "/health", tag = "operations", responses(
    (status = 200, description = "Postgres and Redis answer.", body = Health),
    (status = 503, description = "A dependency failed; its check is `error`.", body = Health),
))]
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
    let body = Health {
        status: if healthy { "ok" } else { "degraded" },
        checks: HealthChecks {
            postgres: label(postgres),
            redis: label(redis),
        },
    };
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
#[utoipa::path(get, path = "/metrics", tag = "operations", responses(
    (status = 200, description = "Prometheus text exposition (version 0.0.4).",
     content_type = "text/plain", body = String),
))]
pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    telemetry::record_pool_use(&state.pool);
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
