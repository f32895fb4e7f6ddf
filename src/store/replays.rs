//! Replay counts, kept off the replay's path.
//!
//! A repeat of a settled call is answered by reading its ledger row: it writes nothing and
//! commits nothing, so it costs one indexed read. How often a key was repeated is shown to the
//! operator ("repetido 3×") and decides nothing, so each process tallies its repeats in memory
//! and writes them in one statement: every [`FLUSH_EVERY`] while the server runs
//! ([`flush_every`]), and when the store closes.
//!
//! Invariants:
//! - a read of ledger rows through this store adds the repeats still pending in this process,
//!   so within one process every repeat is visible at once; another process sees them within
//!   [`FLUSH_EVERY`]. Such a read and a flush exclude each other (a gate), so a read never sees
//!   counts that have left the tally and not yet reached the row;
//! - a flush takes the gate, then its connection, never a connection and then the gate: a
//!   reader waits for the gate holding no connection of the flush's making, while a flush that
//!   held a connection and waited for the gate could wait on a reader that waits for a
//!   connection (once the pool is full, until its acquire timeout). Holding the gate, it waits
//!   at most [`FLUSH_ACQUIRE`] for a connection, then leaves its counts for the next flush, so
//!   readers are held up for that long at worst. On PostgreSQL its statement waits on no row
//!   lock: rows a transaction holds keep their counts for the next flush, so the flush can
//!   neither stall a turn nor close a deadlock cycle with a handler's transaction;
//! - a flush that fails puts its counts back, to go with the next one (one whose commit
//!   succeeded but whose answer was lost counts twice); a crash loses at most the last
//!   interval's counts, never an outcome, a reservation or a lease;
//! - the tally holds one entry per row repeated since the last flush.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{RwLock, RwLockReadGuard};
use tokio_util::sync::CancellationToken;

use super::{Pool, Store, StoreResult};
use crate::domain::TenantId;

/// How often a running server writes pending counts.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How long a flush holding the gate waits for a connection before it leaves its counts for
/// the next one: readers wait on the gate meanwhile.
const FLUSH_ACQUIRE: Duration = Duration::from_millis(250);

/// Repeats per ledger row (tenant, row id) not yet written.
#[derive(Debug, Default)]
pub(crate) struct ReplayTally {
    pending: Mutex<HashMap<(i64, i64), i64>>,
    /// Held shared by reads that add pending counts, exclusively by a flush.
    gate: RwLock<()>,
}

impl ReplayTally {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(i64, i64), i64>> {
        // The map holds plain counters: a panic elsewhere cannot leave it half-updated.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts one repeat of row `id`.
    pub(crate) fn record(&self, tenant: TenantId, id: i64) {
        *self.lock().entry((tenant.0, id)).or_insert(0) += 1;
    }

    /// Holds flushes off while a read fetches rows and adds [`Self::pending`] to them.
    pub(crate) async fn read_gate(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read().await
    }

    /// Adds to each row's count (row id, count) the repeats not yet written; call it under
    /// [`Self::read_gate`], taken before the rows were read.
    pub(crate) fn add_pending<'r>(&self, tenant: TenantId, rows: impl IntoIterator<Item = (i64, &'r mut i64)>) {
        let pending = self.lock();
        for (id, count) in rows {
            *count += pending.get(&(tenant.0, id)).copied().unwrap_or(0);
        }
    }

    fn restore(&self, taken: HashMap<(i64, i64), i64>) {
        let mut pending = self.lock();
        for (row, n) in taken {
            *pending.entry(row).or_insert(0) += n;
        }
    }
}

impl Store {
    /// Writes this process's pending replay counts in one statement; returns the rows counted.
    /// Nothing is sent when none are pending, nor when no connection comes within
    /// [`FLUSH_ACQUIRE`] (the counts wait for the next flush). The gate is taken before the
    /// connection, and the statement waits on no row lock.
    pub async fn flush_replay_counts(&self) -> StoreResult<usize> {
        self.flush_replay_counts_within(FLUSH_ACQUIRE).await
    }

    /// [`Self::flush_replay_counts`], waiting up to `wait` for a connection (the last flush,
    /// when the store closes, waits as long as any statement would).
    pub(super) async fn flush_replay_counts_within(&self, wait: Duration) -> StoreResult<usize> {
        if self.replays.lock().is_empty() {
            return Ok(0);
        }
        let _gate = self.replays.gate.write().await;
        let postponed = || {
            tracing::debug!(?wait, "no connection for the replay counts; they wait for the next flush");
            Ok(0)
        };
        match &self.pool {
            Pool::Postgres(pg) => {
                let Ok(conn) = tokio::time::timeout(wait, pg.pool().acquire()).await else {
                    return postponed();
                };
                let mut conn = conn?;
                let taken = std::mem::take(&mut *self.replays.lock());
                let columns = |i: usize| taken.iter().map(|(&(t, id), &n)| [t, id, n][i]).collect::<Vec<_>>();
                // Rows a transaction holds (a takeover, a settle) are skipped and keep their
                // counts for the next flush: waiting on them while holding other rows' locks
                // could close a deadlock cycle with that transaction.
                let kept: Result<Vec<(i64, i64, i64)>, _> = sqlx::query_as(
                    "WITH c AS (
                         SELECT * FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::BIGINT[]) AS c (tenant_id, id, n)
                     ), free AS (
                         SELECT e.tenant_id, e.id FROM agent_tool_executions e
                         JOIN c ON e.tenant_id = c.tenant_id AND e.id = c.id
                         FOR UPDATE OF e SKIP LOCKED
                     ), counted AS (
                         UPDATE agent_tool_executions AS e SET replay_count = e.replay_count + c.n
                         FROM c JOIN free f ON f.tenant_id = c.tenant_id AND f.id = c.id
                         WHERE e.tenant_id = c.tenant_id AND e.id = c.id
                         RETURNING e.id
                     )
                     SELECT c.tenant_id, c.id, c.n FROM c
                     WHERE c.id NOT IN (SELECT id FROM counted)
                       AND EXISTS (SELECT 1 FROM agent_tool_executions e
                                   WHERE e.tenant_id = c.tenant_id AND e.id = c.id)",
                )
                .bind(columns(0))
                .bind(columns(1))
                .bind(columns(2))
                .fetch_all(&mut *conn)
                .await;
                self.settle_flush(taken, kept.map(|rows| rows.into_iter().map(|(t, id, n)| ((t, id), n)).collect()))
            }
            // One writer and no row locks: the statement waits for nothing once it holds it.
            Pool::Sqlite { write, .. } => {
                let Ok(conn) = tokio::time::timeout(wait, write.acquire()).await else {
                    return postponed();
                };
                let mut conn = conn?;
                let taken = std::mem::take(&mut *self.replays.lock());
                let rows: Vec<[i64; 3]> = taken.iter().map(|(&(tenant, id), &n)| [tenant, id, n]).collect();
                let written = sqlx::query(
                    "UPDATE agent_tool_executions SET replay_count = replay_count + c.n
                     FROM (SELECT value ->> 0 AS tenant_id, value ->> 1 AS id, value ->> 2 AS n
                           FROM json_each($1)) AS c
                     WHERE agent_tool_executions.tenant_id = c.tenant_id AND agent_tool_executions.id = c.id",
                )
                .bind(sqlx::types::Json(&rows))
                .execute(&mut *conn)
                .await;
                self.settle_flush(taken, written.map(|_| HashMap::new()))
            }
        }
    }

    /// After a flush of `taken`: on success, puts back the counts it `kept` (rows it skipped);
    /// on failure, all of them.
    fn settle_flush(
        &self,
        taken: HashMap<(i64, i64), i64>,
        kept: Result<HashMap<(i64, i64), i64>, sqlx::Error>,
    ) -> StoreResult<usize> {
        match kept {
            Ok(kept) => {
                let written = taken.len() - kept.len();
                self.replays.restore(kept);
                Ok(written)
            }
            Err(e) => {
                self.replays.restore(taken);
                Err(e.into())
            }
        }
    }
}

/// Writes pending replay counts every `every` until `stop`; the store writes the rest when it
/// closes.
pub async fn flush_every(store: Store, every: Duration, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = store.flush_replay_counts().await {
            tracing::warn!(error = %e, "could not write replay counts; keeping them for the next try");
        }
    }
}
