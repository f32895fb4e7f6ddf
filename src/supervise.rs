//! Supervision of long-running background tasks (turn workers, queue maintenance, the outbox
//! sender), so that none disappears silently.
//!
//! Invariant: until `shutdown` is cancelled, one instance of a supervised task is running or
//! about to be restarted; a task that returns or panics before then is logged with its name
//! and started again after [`RESTART_DELAY`]. Once `shutdown` is cancelled the supervisor
//! returns as soon as the running instance does.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

/// Pause before a restart, so a task that fails at once (say, on a broken database) logs
/// once a second instead of spinning a core.
pub const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Runs the task `start` builds until `shutdown`, restarting it whenever it ends early.
///
/// A panic is caught here rather than left to the runtime: a panicked task in a `JoinSet` is
/// reported only when someone joins it, which for a pool is at shutdown.
pub async fn supervise<F, Fut>(name: &str, restart_delay: Duration, shutdown: CancellationToken, mut start: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        // Each instance is built afresh by `start`, so no state a panic interrupted is reused.
        let ended = AssertUnwindSafe(start()).catch_unwind().await;
        if shutdown.is_cancelled() {
            if let Err(panic) = ended {
                tracing::error!(task = name, panic = panic_message(&*panic), "background task panicked while stopping");
            }
            return;
        }
        match ended {
            Ok(()) => tracing::error!(task = name, "background task ended before shutdown; restarting it"),
            Err(panic) => {
                tracing::error!(task = name, panic = panic_message(&*panic), "background task panicked; restarting it")
            }
        }
        tokio::select! {
            () = tokio::time::sleep(restart_delay) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

/// Runs `step` every `every` until `stop`: a sweep (expiring proposals, sending reminders). A
/// failed step is logged with `what` and tried again at the next tick.
pub async fn periodically<F, Fut>(what: &str, every: Duration, stop: CancellationToken, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<usize>>,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = step().await {
            tracing::warn!(error = %e, "{what} failed; trying again later");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects log lines so a test can read what was reported.
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl Write for Logs {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Logs {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_task_that_panics_or_returns_is_logged_and_restarted() {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        let starts = Arc::new(AtomicUsize::new(0));
        let shutdown = CancellationToken::new();
        let (counter, stop) = (starts.clone(), shutdown.clone());
        let supervisor = supervise("flaky", Duration::from_millis(1), shutdown.clone(), move || {
            let (counter, stop) = (counter.clone(), stop.clone());
            async move {
                match counter.fetch_add(1, Ordering::SeqCst) {
                    0 => panic!("boom"),
                    1 => {}
                    _ => stop.cancelled().await,
                }
            }
        });
        let run = async {
            while starts.load(Ordering::SeqCst) < 3 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            shutdown.cancel();
        };
        tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(supervisor, run) })
            .await
            .expect("the supervisor returns once shut down");

        assert_eq!(starts.load(Ordering::SeqCst), 3, "started, restarted after the panic and after the return");
        let text = logs.text();
        assert!(text.contains("background task panicked; restarting it") && text.contains("boom"), "{text}");
        assert!(text.contains("background task ended before shutdown; restarting it"), "{text}");
        assert_eq!(text.matches("task=\"flaky\"").count(), 2, "{text}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_task_that_stops_for_shutdown_is_not_restarted() {
        let starts = Arc::new(AtomicUsize::new(0));
        let shutdown = CancellationToken::new();
        let (counter, stop) = (starts.clone(), shutdown.clone());
        shutdown.cancel();
        supervise("steady", Duration::from_millis(1), shutdown, move || {
            let (counter, stop) = (counter.clone(), stop.clone());
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                stop.cancelled().await;
            }
        })
        .await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }
}
