//! The retry loop shared by both clients.

use std::future::Future;
use std::time::Duration;

use reqwest::StatusCode;

use super::ModelError;

/// Honour `retry-after` only up to this; longer means "not now", and a WhatsApp customer is
/// waiting.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_retries: 3, base_delay: Duration::from_millis(500), max_delay: Duration::from_secs(8) }
    }
}

/// What one HTTP attempt came to.
pub(crate) enum Attempt<T> {
    Done(T),
    /// Worth another try, after at least `after` if the server said so.
    Retry {
        message: String,
        after: Option<Duration>,
    },
    Fail(ModelError),
}

impl RetryPolicy {
    fn backoff(&self, attempt: u32) -> Duration {
        let full = self.base_delay.saturating_mul(1 << attempt.min(16)).min(self.max_delay);
        // Up to a quarter less, so synchronized clients spread out.
        let cut = full.as_millis() as u64 / 4;
        full - Duration::from_millis(if cut == 0 { 0 } else { rand::random_range(0..=cut) })
    }

    pub(crate) async fn run<T, F, Fut>(&self, mut call: F) -> Result<T, ModelError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Attempt<T>>,
    {
        let mut attempt = 0;
        loop {
            match call().await {
                Attempt::Done(v) => return Ok(v),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry { message, after } => {
                    // Told to come back much later: that is "not now", and a customer waits.
                    if attempt >= self.max_retries || after.is_some_and(|a| a > RETRY_AFTER_MAX) {
                        return Err(ModelError::Unavailable { attempts: attempt + 1, message });
                    }
                    let wait = after.unwrap_or_else(|| self.backoff(attempt));
                    tracing::warn!(%message, ?wait, attempt = attempt + 1, "model call failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }
}

/// `retry-after-ms` or `retry-after` (seconds), if present.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    // Any number parses (negative, NaN, huge): only a sane positive duration counts.
    let read = |name: &str, scale: f64| {
        let v = headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok()? / scale;
        Duration::try_from_secs_f64(v).ok().filter(|d| !d.is_zero())
    };
    read("retry-after-ms", 1000.0).or_else(|| read("retry-after", 1.0))
}

/// Statuses worth retrying besides 429 (which depends on its headers).
pub(crate) fn transient_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 408 | 409 | 500..=599)
}

pub(crate) fn transport_error(e: &reqwest::Error) -> String {
    if e.is_timeout() { format!("timed out: {e}") } else { format!("request failed: {e}") }
}
