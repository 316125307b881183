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

fn main() -> anyhow::Result<()> {
    telemetry::init_tracing("worker");
    #[cfg(target_os = "linux")]
    without_huge_pages();
    let cli = Cli::parse();
    let settings = WorkerSettings::from_env(cli.modality)?;
    // One runtime thread per core the process may use (APP_WORKER_THREADS).
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.threads)
        .enable_all()
        .build()?
        .block_on(async {
            let worker = Worker::build(settings).await?;
            worker.run_until_stopped(runtime::shutdown_signal()).await;
            Ok(())
        })
}

/// Turns transparent huge pages off for this process. mimalloc hands freed memory back to the
/// kernel 64 KiB at a time; where the kernel backs the heap with huge pages (THP `always`, or
/// `madvise` for a heap advised so), khugepaged later fills those holes back to whole 2 MiB
/// pages. In the 10-minute soak (`scripts/bench soak`) that made the worker's resident set
/// climb 3.5 MB a minute, by 20 %, while the memory it held stayed flat. (The `no_thp`
/// feature of mimalloc stops it advising huge pages; this covers hosts set to `always`.)
#[cfg(target_os = "linux")]
fn without_huge_pages() {
    if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::warn!(%error, "could not turn transparent huge pages off; memory may creep up");
    }
}
