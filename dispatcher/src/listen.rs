//! Waking on new deliveries, resends and recovers with LISTEN/NOTIFY, so they start promptly.
//!
//! The listening connection is a session of its own (`APP_DATABASE_DIRECT_URL`), not a pooled
//! one: `LISTEN` needs a session, which PgBouncer in transaction mode does not keep. When it
//! breaks (a restart, a failover) it is opened again, after a pause that doubles with each
//! failure up to [`MAX_PAUSE`], on whichever host of a multi-host URL is the primary by then.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

/// A channel and who waits for its notifications.
pub type Wake = (&'static str, Arc<Notify>);

/// The first pause before reconnecting.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between reconnections (polling covers the gap meanwhile).
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Listens on every channel of `wakes` through a connection made with `config` and wakes its
/// waiter on each notification, reconnecting after failures. Runs until aborted.
pub async fn notify_on_new(config: tokio_postgres::Config, wakes: Vec<Wake>) {
    let mut pause = FIRST_PAUSE;
    loop {
        let listened = listen_once(&config, &wakes, &mut pause).await;
        if let Err(err) = listened {
            tracing::warn!(error = %err, retry_in = ?pause, "Delivery notifications interrupted; reconnecting");
        }
        // Polling covers the gap, and whatever was notified meanwhile is looked for now.
        wake_all(&wakes);
        tokio::time::sleep(pause).await;
        pause = next_pause(pause);
    }
}

/// The pause after `pause`: twice as long, at most [`MAX_PAUSE`].
fn next_pause(pause: Duration) -> Duration {
    (pause * 2).min(MAX_PAUSE)
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

/// One connection's listening; `pause` goes back to [`FIRST_PAUSE`] once `LISTEN` took effect.
async fn listen_once(
    config: &tokio_postgres::Config,
    wakes: &[Wake],
    pause: &mut Duration,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
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
                *pause = FIRST_PAUSE;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_up_to_its_ceiling() {
        let mut pauses = vec![FIRST_PAUSE];
        for _ in 0..6 {
            pauses.push(next_pause(*pauses.last().unwrap()));
        }

        let millis: Vec<u128> = pauses.iter().map(Duration::as_millis).collect();
        assert_eq!(millis, [250, 500, 1000, 2000, 4000, 5000, 5000]);
    }
}
