//! What a handler's transaction proves before it writes an effect in Balcão's own database.
//!
//! Two shapes, one rule: the effect, its ledger row and the row's outcome commit together or
//! not at all, and a call that does not own the key writes nothing.
//! - [`Fence::Held`]: a row reserved earlier (or taken over) at a generation. The transaction
//!   re-checks it (locking it on PostgreSQL) before the effect. This is the two-phase path,
//!   which outside effects need: their reservation must be durable before the request leaves.
//! - [`Fence::Claim`]: no row yet. A tool whose effect is local ([`super::Reach::Local`])
//!   inserts its row in the effect's own transaction, so a call costs one commit instead of two
//!   (reservation, then effect with outcome). The unique key is the lock: a concurrent
//!   duplicate's insert waits for this transaction (PostgreSQL) or for the single writer
//!   (SQLite), then finds the key taken and writes nothing; a crash before the commit leaves
//!   neither row nor effect, so there is nothing to lease, renew or take over.

use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};

use crate::store::NewExecution;

/// A ledger row held at a generation, inside the transaction that writes its effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub execution: i64,
    pub generation: i64,
}

/// A key no row holds yet, claimed by the transaction that writes the effect.
#[derive(Debug)]
pub struct Claim<'a> {
    pub new: NewExecution<'a>,
    /// When the call was made, on the database's clock.
    pub now: DateTime<Utc>,
    /// Set once a transaction that stored the outcome under the claimed row has committed.
    settled: AtomicBool,
    /// Set when a transaction found the key already taken (a concurrent duplicate's row).
    lost: AtomicBool,
}

impl<'a> Claim<'a> {
    pub fn new(new: NewExecution<'a>, now: DateTime<Utc>) -> Self {
        Self { new, now, settled: AtomicBool::new(false), lost: AtomicBool::new(false) }
    }

    pub fn settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Records that the key was found taken.
    pub fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
    }
}

/// Proof a handler carries into the transaction of its effect (see the module docs).
#[derive(Debug, Clone, Copy)]
pub enum Fence<'a> {
    /// `settled` is set once a transaction stored the outcome under the held row: the executor
    /// then has nothing left to store (a second statement that would change nothing).
    Held {
        held: Held,
        settled: &'a AtomicBool,
    },
    Claim(&'a Claim<'a>),
}

impl Fence<'_> {
    /// Records that a transaction which stored the outcome under this fence's row committed.
    pub fn mark_settled(&self) {
        match self {
            Self::Held { settled, .. } => settled.store(true, Ordering::Release),
            Self::Claim(claim) => claim.settled.store(true, Ordering::Release),
        }
    }
}
