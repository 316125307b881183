//! `worker --modality text,image`: runs the queue workers of the named modalities.

use clap::Parser;
use moderation_shared::{domain::Modality, runtime, telemetry};
use moderation_worker::{Worker, WorkerSettings};

/// mimalloc, as in the api: fewer cycles per allocation, and memory kept rather than handed
/// back to the kernel between bursts.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command line of the worker.
#[derive(Debug, Parser)]
#[command(name = "worker", about = "Moderation queue worker")]
struct Cli {
    /// Comma-separated modalities to work on: text, image, video, audio (default all).
    #[arg(long, value_delimiter = ',', default_values_t = Modality::ALL)]
    modality: Vec<Modality>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    telemetry::init_tracing("worker");
    let cli = Cli::parse();
    let worker = Worker::build(WorkerSettings::from_env(cli.modality)?).await?;
    worker.run_until_stopped(runtime::shutdown_signal()).await;
    Ok(())
}
