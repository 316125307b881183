//! Each delivery as a task of its own. apalis polls the deliveries of a worker inside that
//! worker's one task (a `FuturesUnordered`), so every job's async work (claims and results,
//! language detection, segmenting, scoring, lists) ran on one runtime thread at a time, however
//! many cores the process was given; only inference left it, for the blocking threads. As a
//! task, a delivery runs on whichever runtime thread is free.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use tokio::task::JoinHandle;

/// Runs `future` as a task on the current runtime and returns its output. Dropping the
/// returned future aborts the task, as dropping `future` itself would have stopped it; a panic
/// in the task resumes in the caller, as it would have without the task.
pub async fn on_runtime<F>(future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    AbortOnDrop(tokio::spawn(future)).await
}

/// A task that is aborted when its handle is dropped.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match Pin::new(&mut self.0).poll(cx) {
            Poll::Ready(Ok(output)) => Poll::Ready(output),
            Poll::Ready(Err(err)) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            // Cancelled: only by this handle's drop (then nobody polls it) or by the runtime
            // shutting down, which drops this future too.
            Poll::Ready(Err(_)) | Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            atomic::{AtomicBool, Ordering},
            Arc,
        },
        time::Duration,
    };

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("runtime-thread")
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn the_future_runs_on_a_runtime_thread_not_the_thread_blocking_on_it() {
        let ran_on = runtime().block_on(on_runtime(async {
            std::thread::current().name().map(str::to_owned)
        }));

        assert_eq!(ran_on.as_deref(), Some("runtime-thread"));
    }

    #[test]
    fn two_busy_futures_run_at_once_from_one_caller() {
        // Each signals the other, then blocks its thread until the other's signal: polled by
        // one thread (as inside one future), the first would wait in vain.
        let (to_b, from_a) = std::sync::mpsc::channel();
        let (to_a, from_b) = std::sync::mpsc::channel();
        let meet = |tell: std::sync::mpsc::Sender<()>, hear: std::sync::mpsc::Receiver<()>| async move {
            tell.send(()).unwrap();
            hear.recv_timeout(Duration::from_secs(5)).is_ok()
        };

        let (a, b) = runtime().block_on(futures_util::future::join(
            on_runtime(meet(to_b, from_b)),
            on_runtime(meet(to_a, from_a)),
        ));

        assert!(a && b, "the two futures did not run at once");
    }

    #[test]
    fn a_panic_in_the_task_resumes_in_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            runtime().block_on(on_runtime(async { panic!("the job's own panic") }))
        });

        let payload = caught.unwrap_err();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"the job's own panic"));
    }

    #[test]
    fn dropping_the_future_aborts_the_task() {
        let finished = Arc::new(AtomicBool::new(false));
        let runtime = runtime();
        runtime.block_on(async {
            let flag = finished.clone();
            let started = Arc::new(tokio::sync::Notify::new());
            let running = started.clone();
            let task = on_runtime(async move {
                running.notify_one();
                tokio::time::sleep(Duration::from_millis(300)).await;
                flag.store(true, Ordering::SeqCst);
            });
            // Polled until the task has started, then dropped.
            tokio::select! {
                () = task => unreachable!("the task sleeps longer than it takes to start"),
                () = started.notified() => {}
            }
            tokio::time::sleep(Duration::from_millis(600)).await;
        });

        assert!(
            !finished.load(Ordering::SeqCst),
            "the task ran on after its drop"
        );
    }
}
