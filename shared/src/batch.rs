//! Natural batching of one kind of write across concurrent callers.
//!
//! Under load, many handlers make the same small write at once (insert a job, claim a job,
//! acknowledge a queue entry). Each write alone costs a round trip, a statement and, in
//! Postgres, a commit; gathered, a hundred of them cost about as much as one. A [`Batcher`]
//! runs one task that takes the first waiting request, adds every other request already
//! waiting (up to a maximum), and runs them as one batch while the next batch gathers. There
//! is no timer: a lone request runs at once, so batching adds no latency when the service is
//! quiet, and batches grow only as fast as requests arrive.
//!
//! When a batch fails as a whole, each of its requests is run again alone, so one bad request
//! cannot fail its neighbours and every caller gets the answer its own request deserves;
//! unless the failure says the store cannot be reached at all ([`Execute::is_outage`]): then
//! every caller gets that answer at once, rather than each waiting for it again alone.

use std::{future::Future, sync::Arc};

use tokio::sync::{mpsc, oneshot, Semaphore};

/// Runs a batch of requests of one kind.
pub trait Execute: Send + Sync + 'static {
    /// One caller's request.
    type Request: Send + Sync + 'static;
    /// One caller's answer.
    type Response: Send + 'static;
    /// A failure of a whole batch.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Runs `requests` together and answers each, in order: the result holds exactly one
    /// response per request.
    fn execute(
        &self,
        requests: &[Self::Request],
    ) -> impl Future<Output = Result<Vec<Self::Response>, Self::Error>> + Send;

    /// Whether `err` says the store cannot be reached at all (no connection in time, no
    /// answer by the deadline), so running the requests alone would only fail each again,
    /// slower. By default no failure is.
    fn is_outage(&self, _err: &Self::Error) -> bool {
        false
    }
}

/// Why a batched request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum BatchError<E: std::error::Error + 'static> {
    /// Its batch, and then the request alone, failed.
    #[error(transparent)]
    Failed(E),
    /// Its batch failed because the store could not be reached; the error's text.
    #[error("the store is unreachable: {0}")]
    Outage(String),
    /// The batcher stopped (its task ended or the batch panicked) before answering.
    #[error("the batcher stopped before answering")]
    Stopped,
}

type Waiting<X> = (
    <X as Execute>::Request,
    oneshot::Sender<Result<<X as Execute>::Response, BatchError<<X as Execute>::Error>>>,
);

/// A handle to a batching task; cheap to clone. The task ends when every handle is dropped,
/// after answering what it holds.
pub struct Batcher<X: Execute> {
    tx: mpsc::Sender<Waiting<X>>,
}

impl<X: Execute> Clone for Batcher<X> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
        }
    }
}

impl<X: Execute> std::fmt::Debug for Batcher<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").finish_non_exhaustive()
    }
}

impl<X: Execute> Batcher<X> {
    /// Starts a batching task on the current Tokio runtime that runs at most `max_batch`
    /// requests per batch and at most `concurrency` batches at once.
    pub fn spawn(executor: X, max_batch: usize, concurrency: usize) -> Self {
        let max_batch = max_batch.max(1);
        let (tx, rx) = mpsc::channel(max_batch * concurrency.max(1));
        tokio::spawn(gather(
            Arc::new(executor),
            rx,
            max_batch,
            Arc::new(Semaphore::new(concurrency.max(1))),
        ));
        Self { tx }
    }

    /// Runs `request` in the next batch and returns its answer.
    ///
    /// Dropping the returned future does not withdraw a request already handed over: it still
    /// runs, and only its answer is lost.
    pub async fn run(&self, request: X::Request) -> Result<X::Response, BatchError<X::Error>> {
        let (answer, answered) = oneshot::channel();
        self.tx
            .send((request, answer))
            .await
            .map_err(|_| BatchError::Stopped)?;
        answered.await.unwrap_or(Err(BatchError::Stopped))
    }
}

/// The batching task: waits for a request and a free slot, takes what else is waiting, and
/// runs the batch beside the gathering of the next.
async fn gather<X: Execute>(
    executor: Arc<X>,
    mut rx: mpsc::Receiver<Waiting<X>>,
    max_batch: usize,
    slots: Arc<Semaphore>,
) {
    while let Some(first) = rx.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let executor = executor.clone();
        tokio::spawn(async move {
            run_batch(&*executor, batch).await;
            drop(slot);
        });
    }
}

/// Runs one batch and answers its callers; a failed batch of several is run again one
/// request at a time.
async fn run_batch<X: Execute>(executor: &X, batch: Vec<Waiting<X>>) {
    let (requests, answers): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
    match executor.execute(&requests).await {
        Ok(responses) if responses.len() == requests.len() => {
            for (answer, response) in answers.into_iter().zip(responses) {
                let _ = answer.send(Ok(response));
            }
        }
        Ok(responses) => {
            tracing::error!(
                requests = requests.len(),
                responses = responses.len(),
                "A batch answered the wrong number of requests"
            );
        }
        Err(err) if executor.is_outage(&err) => {
            let text = format!("{:#}", anyhow::Error::new(err));
            tracing::warn!(error = %text, size = requests.len(), "A batch failed: the store is unreachable");
            for answer in answers {
                let _ = answer.send(Err(BatchError::Outage(text.clone())));
            }
        }
        Err(err) if requests.len() == 1 => {
            if let Some(answer) = answers.into_iter().next() {
                let _ = answer.send(Err(BatchError::Failed(err)));
            }
        }
        Err(err) => {
            tracing::debug!(error = %err, size = requests.len(), "A batch failed; running its requests one by one");
            for (request, answer) in requests.iter().zip(answers) {
                let result = executor
                    .execute(std::slice::from_ref(request))
                    .await
                    .map_err(BatchError::Failed)
                    .and_then(|mut responses| responses.pop().ok_or(BatchError::Stopped));
                let _ = answer.send(result);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Doubles numbers, records the size of each batch, holds the first batch until told, and
    /// fails any batch holding a 13.
    #[derive(Default)]
    struct Doubler {
        hold_first: bool,
        sizes: Mutex<Vec<usize>>,
        gate: tokio::sync::Notify,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("unlucky")]
    struct Unlucky;

    impl Execute for Arc<Doubler> {
        type Request = u32;
        type Response = u32;
        type Error = Unlucky;

        async fn execute(&self, requests: &[u32]) -> Result<Vec<u32>, Unlucky> {
            let first = {
                let mut sizes = self.sizes.lock().unwrap();
                sizes.push(requests.len());
                sizes.len() == 1
            };
            if first && self.hold_first {
                self.gate.notified().await;
            }
            if requests.contains(&13) {
                return Err(Unlucky);
            }
            Ok(requests.iter().map(|n| n * 2).collect())
        }
    }

    /// Lets every other task of this single-threaded runtime run until it waits.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    /// Runs `first` alone (held in its batch), then hands over `rest` while it is held, then
    /// releases it; returns every answer, `first`'s first, and the batch sizes.
    async fn run_behind_a_held_batch(
        max_batch: usize,
        first: u32,
        rest: &[u32],
    ) -> (Vec<Option<u32>>, Vec<usize>) {
        let doubler = Arc::new(Doubler {
            hold_first: true,
            ..Doubler::default()
        });
        let batcher = Batcher::spawn(doubler.clone(), max_batch, 1);
        let spawn = |n: u32| {
            let batcher = batcher.clone();
            tokio::spawn(async move { batcher.run(n).await.ok() })
        };
        let mut handles = vec![spawn(first)];
        settle().await;
        handles.extend(rest.iter().map(|&n| spawn(n)));
        settle().await;
        doubler.gate.notify_one();
        let answers = futures_util::future::join_all(handles)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let sizes = doubler.sizes.lock().unwrap().clone();
        (answers, sizes)
    }

    #[tokio::test]
    async fn a_lone_request_runs_at_once_in_a_batch_of_one() {
        let doubler = Arc::new(Doubler::default());
        let batcher = Batcher::spawn(doubler.clone(), 100, 1);

        assert_eq!(batcher.run(21).await.unwrap(), 42);
        assert_eq!(*doubler.sizes.lock().unwrap(), vec![1]);
    }

    #[tokio::test]
    async fn requests_waiting_while_a_batch_runs_go_together_in_the_next() {
        let rest: Vec<u32> = (2..=10).collect();

        let (answers, sizes) = run_behind_a_held_batch(100, 1, &rest).await;

        let expected: Vec<_> = (1..=10).map(|n| Some(n * 2)).collect();
        assert_eq!(answers, expected);
        assert_eq!(sizes, vec![1, 9]);
    }

    #[tokio::test]
    async fn a_failed_batch_is_run_again_one_by_one_so_only_the_bad_request_fails() {
        let (answers, sizes) = run_behind_a_held_batch(100, 1, &[12, 13, 14]).await;

        assert_eq!(answers, vec![Some(2), Some(24), None, Some(28)]);
        assert_eq!(sizes, vec![1, 3, 1, 1, 1]);
    }

    #[tokio::test]
    async fn at_most_max_batch_requests_run_together() {
        let rest: Vec<u32> = (2..=9).collect();

        let (answers, sizes) = run_behind_a_held_batch(4, 1, &rest).await;

        assert!(answers.iter().all(Option::is_some), "{answers:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 9);
        assert!(sizes[1..].iter().all(|&s| s <= 4), "{sizes:?}");
        assert!(sizes.contains(&4), "{sizes:?}");
    }
}
