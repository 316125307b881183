//! `dispatcher`: sends signed webhooks on the 12-attempt schedule.

use moderation_dispatcher::{Dispatcher, DispatcherSettings};
use moderation_shared::{runtime, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_tracing("dispatcher");
    let dispatcher = Dispatcher::build(DispatcherSettings::from_env()?).await?;
    dispatcher
        .run_until_stopped(runtime::shutdown_signal())
        .await;
    Ok(())
}
