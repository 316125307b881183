//! Running a dispatcher against a test app, and making deliveries to dispatch.

use std::time::Duration;

use moderation_dispatcher::{schedule::Schedule, Dispatcher, DispatcherSettings};
use moderation_shared::{
    db::deliveries::{self, NewDelivery},
    domain::{AccountId, DeliveryId, JobId, WebhookEvent},
};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::{receiver::TestReceiver, TestApp};

/// A dispatcher running in the test process; stopped (gracefully) when dropped.
pub struct RunningDispatcher {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningDispatcher {
    /// Stops it and waits for its attempts in flight to end.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for RunningDispatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestApp {
    /// Dispatcher settings for this app: its database and sealing key, the receiver's CA,
    /// private addresses allowed, the schedule scaled by `scale`.
    pub fn dispatcher_settings(&self, receiver: &TestReceiver, scale: f64) -> DispatcherSettings {
        DispatcherSettings {
            depth_sample: Duration::from_millis(50),
            extra_ca_pem: Some(receiver.ca_pem.clone().into_bytes()),
            schedule: Schedule::scaled(scale),
            attempt_timeout: Duration::from_secs(5),
            concurrency: 32,
            idle_poll: Duration::from_millis(200),
            ..DispatcherSettings::for_local(
                self.db.settings.clone(),
                self.redis.clone(),
                self.encryption_key.clone(),
            )
        }
    }

    /// Starts a dispatcher with `settings` in this process.
    pub async fn start_dispatcher(&self, settings: DispatcherSettings) -> RunningDispatcher {
        let dispatcher = Dispatcher::build(settings).await.expect("dispatcher");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(dispatcher.run_until_stopped(async {
            let _ = stopped.await;
        }));
        RunningDispatcher {
            stop: Some(stop),
            task,
        }
    }

    /// Stores a completed job of `account` and its delivery of `body` to `target`, as a worker
    /// does when a job completes (as a delivery to the account's URL: held if `target` is that
    /// URL and it is disabled or paused). Returns the delivery id.
    pub async fn make_delivery(&self, account: AccountId, target: &str, body: &[u8]) -> Uuid {
        self.store_delivery(account, target, body, true).await
    }

    /// As [`Self::make_delivery`], for a job with its own `webhook_url` (`target`), which has
    /// no state.
    pub async fn make_job_url_delivery(
        &self,
        account: AccountId,
        target: &str,
        body: &[u8],
    ) -> Uuid {
        self.store_delivery(account, target, body, false).await
    }

    async fn store_delivery(
        &self,
        account: AccountId,
        target: &str,
        body: &[u8],
        to_account_url: bool,
    ) -> Uuid {
        let mut client = self.db.pool.get().await.expect("connect");
        let tx = client.transaction().await.expect("tx");
        let job = JobId::new();
        tx.execute(
            "INSERT INTO jobs (id, account_id, type, status, stage, content, is_prohibited, completed_at) \
             VALUES ($1, $2, 'text', 'completed', 'done', 'hello', false, now())",
            &[&job.0, &account.0],
        )
        .await
        .expect("insert job");
        let id = DeliveryId::new();
        deliveries::insert_many(
            &tx,
            &[NewDelivery {
                id,
                event: WebhookEvent::JobCompleted,
                job_id: Some(job),
                account_id: account,
                target_url: target.to_owned(),
                body: body.to_vec(),
                to_account_url,
            }],
        )
        .await
        .expect("insert delivery");
        tx.commit().await.expect("commit");
        id.0
    }

    /// The delivery's state and attempt count.
    pub async fn delivery_state(&self, id: Uuid) -> (String, i32) {
        let client = self.db.pool.get().await.expect("connect");
        let row = client
            .query_one(
                "SELECT state, attempts FROM deliveries WHERE id = $1",
                &[&id],
            )
            .await
            .expect("delivery");
        (row.get(0), row.get(1))
    }
}
