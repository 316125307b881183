//! `dashboard`: the web dashboard process.

use moderation_dashboard::{Application, DashboardSettings};
use moderation_shared::{redis_conn::RedisConn, runtime, telemetry};

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_tracing("dashboard");
    let settings = DashboardSettings::from_env()?;
    runtime::check_redis_layout(&RedisConn::new(&settings.redis)?).await?;
    let app = Application::build(settings)?;
    tracing::info!(port = app.port(), "Dashboard listening");
    app.run_until_stopped().await?;
    Ok(())
}
