//! The outside half of the fence: when a handler may still send a request whose effect lies
//! outside Balcão, and how long an attempt that took a row over waits for its predecessor's.
//!
//! The ledger's fence (row and generation) guards Balcão's own writes only. A worker frozen
//! past its lease (SIGSTOP, a swapped-out host, a stalled runtime) wakes up while another
//! attempt owns its key, and a request it sends then is a second effect at any provider that
//! does not deduplicate creates itself (Asaas has no idempotency key). So:
//! - a holder sends such a request only while its [`SendWindow`] is open: until a third of a
//!   lease before the lease it last renewed runs out, on the monotonic clock, which keeps
//!   counting while a process is frozen. A frozen worker that wakes past it sends nothing;
//! - an attempt that takes over a row left running waits, before it looks the effect up,
//!   until the predecessor can no longer send ([`Attempt::predecessor_sends_until`]) plus the
//!   provider's timeout, so a request sent just before the window closed has landed (or was
//!   given up) by the time of the lookup.
//!
//! What remains: a worker frozen in the instant between the check and the request's bytes
//! leaving the socket. Only a provider that deduplicates creates (Bacen's `PUT /cob/{txid}`,
//! Mercado Pago's `X-Idempotency-Key`) closes that; those gateways need no wait.
//!
//! [`Attempt::predecessor_sends_until`]: crate::ledger::Attempt::predecessor_sends_until

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Until when the holder of a lease may send a request with an outside effect. Clones share
/// the window: the lease's renewals move it for every clone.
#[derive(Debug, Clone)]
pub struct SendWindow(Option<Arc<Mutex<Instant>>>);

impl SendWindow {
    /// No lease behind the call (a test, a command-line tool): always open.
    pub fn unbounded() -> Self {
        Self(None)
    }

    /// The window of a lease of length `lease` just taken or renewed at `at`.
    pub fn for_lease(at: Instant, lease: Duration) -> Self {
        Self(Some(Arc::new(Mutex::new(closes(at, lease)))))
    }

    /// The lease was renewed at `at`: the window moves with it (never backwards).
    pub(crate) fn renewed(&self, at: Instant, lease: Duration) {
        if let Some(shared) = &self.0 {
            let mut until = shared.lock().unwrap_or_else(PoisonError::into_inner);
            *until = (*until).max(closes(at, lease));
        }
    }

    /// The lease was lost: nothing more may be sent.
    pub(crate) fn close(&self) {
        if let Some(shared) = &self.0 {
            *shared.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        }
    }

    /// Whether a request sent now would still be inside the lease.
    pub fn is_open(&self) -> bool {
        match &self.0 {
            None => true,
            Some(shared) => Instant::now() < *shared.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }
}

/// A third of the lease is the margin for the request to leave after the check and for the
/// clocks of two processes to disagree.
fn closes(at: Instant, lease: Duration) -> Instant {
    at + lease - lease / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_follows_renewals_and_shuts_when_the_lease_is_lost() {
        let lease = Duration::from_secs(30);
        let start = Instant::now();
        let window = SendWindow::for_lease(start, lease);
        assert!(window.is_open());
        // A lease taken long ago and never renewed has run out.
        let stale = SendWindow::for_lease(start - Duration::from_secs(25), lease);
        assert!(!stale.is_open());
        stale.renewed(start, lease);
        assert!(stale.is_open(), "renewed: open again");
        // A late answer to an older renewal does not move it back.
        stale.renewed(start - Duration::from_secs(25), lease);
        assert!(stale.is_open());
        let clone = stale.clone();
        stale.close();
        assert!(!clone.is_open(), "clones share the window");
        assert!(SendWindow::unbounded().is_open());
    }
}
