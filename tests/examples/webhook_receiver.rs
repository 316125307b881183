//! A local HTTPS webhook receiver for `scripts/bench`: prints its base URL and writes its CA
//! to the path given, answers 200 to everything, and runs until stdin closes.

use moderation_tests::receiver::TestReceiver;
use tokio::io::AsyncReadExt;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let ca_path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: webhook_receiver CA_FILE"))?;
    let receiver = TestReceiver::start().await;
    std::fs::write(&ca_path, &receiver.ca_pem)?;
    println!("{}", receiver.base_url);
    let mut sink = Vec::new();
    tokio::io::stdin().read_to_end(&mut sink).await?;
    eprintln!("received {}", receiver.received().len());
    Ok(())
}
