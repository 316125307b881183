//! Waking on new deliveries with LISTEN/NOTIFY, so the first attempt leaves promptly.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use moderation_shared::{config::DatabaseSettings, db::deliveries::CHANNEL};
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

/// Listens on the deliveries channel and wakes `wake` on every notification, reconnecting
/// after failures. Runs until aborted.
pub async fn notify_on_new(database: DatabaseSettings, wake: Arc<Notify>) {
    loop {
        if let Err(err) = listen_once(&database, &wake).await {
            tracing::warn!(error = %err, "Delivery notifications interrupted; reconnecting");
        }
        // Polling covers the gap; reconnect after a short pause.
        tokio::time::sleep(Duration::from_secs(1)).await;
        wake.notify_one();
    }
}

async fn listen_once(
    database: &DatabaseSettings,
    wake: &Notify,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = tokio_postgres::connect(database.url.expose(), NoTls).await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement = format!("LISTEN {CHANNEL}");
    let listen = client.batch_execute(&statement);
    tokio::pin!(listen);
    // The connection must be driven while LISTEN runs.
    loop {
        tokio::select! {
            done = &mut listen => {
                done?;
                // A delivery made before LISTEN took effect sent its notification to nobody:
                // look once now that every later one will arrive.
                wake.notify_one();
                break;
            }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(_))) => wake.notify_one(),
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(err),
                None => return Ok(()),
            }
        }
    }
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(_) = message? {
            wake.notify_one();
        }
    }
    Ok(())
}
