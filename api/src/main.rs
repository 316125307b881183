//! `api`: the HTTP API process.

use moderation_api::{ApiSettings, Application};
use moderation_shared::{redis_conn::RedisConn, runtime, telemetry};

/// mimalloc: under load the system allocator spent a tenth of the api's time, and gave memory
/// back to the kernel only to ask for it again.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_tracing("api");
    let settings = ApiSettings::from_env()?;
    runtime::check_redis_layout(&RedisConn::new(&settings.redis)?).await?;
    let app = Application::build(settings)?;
    tracing::info!(port = app.port(), "API listening");
    app.run_until_stopped().await?;
    Ok(())
}
