//! Waking on new deliveries, resends and recovers with LISTEN/NOTIFY, so they start promptly.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use moderation_shared::config::DatabaseSettings;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

/// A channel and who waits for its notifications.
pub type Wake = (&'static str, Arc<Notify>);

/// Listens on every channel of `wakes` and wakes its waiter on each notification, reconnecting
/// after failures. Runs until aborted.
pub async fn notify_on_new(database: DatabaseSettings, wakes: Vec<Wake>) {
    loop {
        if let Err(err) = listen_once(&database, &wakes).await {
            tracing::warn!(error = %err, "Delivery notifications interrupted; reconnecting");
        }
        // Polling covers the gap; reconnect after a short pause.
        tokio::time::sleep(Duration::from_secs(1)).await;
        wake_all(&wakes);
    }
}

fn wake_all(wakes: &[Wake]) {
    for (_, wake) in wakes {
        wake.notify_one();
    }
}

fn wake_channel(wakes: &[Wake], channel: &str) {
    for (name, wake) in wakes {
        if *name == channel {
            wake.notify_one();
        }
    }
}

async fn listen_once(
    database: &DatabaseSettings,
    wakes: &[Wake],
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = tokio_postgres::connect(database.url.expose(), NoTls).await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let statement: String = wakes
        .iter()
        .map(|(channel, _)| format!("LISTEN {channel};"))
        .collect();
    let listen = client.batch_execute(&statement);
    tokio::pin!(listen);
    // The connection must be driven while LISTEN runs.
    loop {
        tokio::select! {
            done = &mut listen => {
                done?;
                // A delivery made before LISTEN took effect sent its notification to nobody:
                // look once now that every later one will arrive.
                wake_all(wakes);
                break;
            }
            message = messages.next() => match message {
                Some(Ok(AsyncMessage::Notification(n))) => wake_channel(wakes, n.channel()),
                Some(Ok(_)) => {}
                Some(Err(err)) => return Err(err),
                None => return Ok(()),
            }
        }
    }
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(n) = message? {
            wake_channel(wakes, n.channel());
        }
    }
    Ok(())
}
