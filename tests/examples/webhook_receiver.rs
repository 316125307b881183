//! A local HTTPS webhook receiver for `scripts/bench`: prints its base URL and writes its CA
//! to the path given, answers 200 to everything, and runs until stdin closes; then prints how
//! many requests came and how many distinct `webhook-id`s they carried. `--count-only` keeps
//! no request (for long runs).

use moderation_tests::receiver::TestReceiver;
use tokio::io::AsyncReadExt;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let ca_path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: webhook_receiver CA_FILE [--count-only]"))?;
    let receiver = TestReceiver::start().await;
    if std::env::args().any(|a| a == "--count-only") {
        receiver.count_only();
    }
    std::fs::write(&ca_path, &receiver.ca_pem)?;
    println!("{}", receiver.base_url);
    let mut sink = Vec::new();
    tokio::io::stdin().read_to_end(&mut sink).await?;
    let (requests, distinct) = receiver.counts();
    eprintln!("received {requests} ({distinct} distinct webhook-ids)");
    Ok(())
}
