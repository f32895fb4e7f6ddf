//! Time helpers: exponential backoff with jitter (so retries of many failed turns do not arrive
//! together), and a std duration as a chrono delta.

use std::time::Duration;

use chrono::TimeDelta;

/// A std duration as a chrono delta; one too long for chrono saturates (a setting of "forever").
pub fn to_delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The delay before attempt `attempt + 1`: `base * 2^(attempt-1)` capped at `max`, then
    /// drawn uniformly from its upper half ("equal jitter": never zero, never above the cap).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let full = self.base.saturating_mul(1u32 << exp).min(self.max);
        let half = full / 2;
        let jitter_ms = half.as_millis() as u64;
        let extra = if jitter_ms == 0 { 0 } else { rand::random_range(0..=jitter_ms) };
        half + Duration::from_millis(extra)
    }
}

/// One attempt's failure: worth another try (a timeout, a 5xx: the reason kept), or final.
#[derive(Debug)]
pub enum Try<E> {
    Again(String),
    Final(E),
}

/// Why [`retried`] gave up.
#[derive(Debug)]
pub enum GaveUp<E> {
    /// Every attempt failed with a reason worth retrying; the last one's.
    Exhausted(String),
    Final(E),
}

/// Runs `attempt` until it succeeds or fails for good, at most `attempts` times, waiting
/// `backoff` between attempts. `what` names the call in the warnings.
pub async fn retried<T, E, F, Fut>(attempts: u32, backoff: Backoff, what: &str, mut attempt: F) -> Result<T, GaveUp<E>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Try<E>>>,
{
    let mut last = String::new();
    for n in 1..=attempts {
        if n > 1 {
            tokio::time::sleep(backoff.delay(n - 1)).await;
        }
        match attempt().await {
            Ok(done) => return Ok(done),
            Err(Try::Final(e)) => return Err(GaveUp::Final(e)),
            Err(Try::Again(reason)) => {
                tracing::warn!(attempt = n, %reason, "{what} failed");
                last = reason;
            }
        }
    }
    Err(GaveUp::Exhausted(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_caps() {
        let b = Backoff { base: Duration::from_secs(1), max: Duration::from_secs(300) };
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_millis(500) && d1 <= Duration::from_secs(1));
            let d4 = b.delay(4);
            assert!(d4 >= Duration::from_secs(4) && d4 <= Duration::from_secs(8));
            let d40 = b.delay(40);
            assert!(d40 >= Duration::from_secs(150) && d40 <= Duration::from_secs(300));
        }
    }
}
