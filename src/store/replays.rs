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
//! - a flush that fails puts its counts back, to go with the next one; a crash loses at most
//!   the last interval's counts, never an outcome, a reservation or a lease;
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

    /// Counts one repeat of row `id`; returns the repeats of it now pending.
    pub(crate) fn record(&self, tenant: TenantId, id: i64) -> i64 {
        let mut pending = self.lock();
        let n = pending.entry((tenant.0, id)).or_insert(0);
        *n += 1;
        *n
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
    /// Nothing is sent when none are pending.
    pub async fn flush_replay_counts(&self) -> StoreResult<usize> {
        let _gate = self.replays.gate.write().await;
        let taken = std::mem::take(&mut *self.replays.lock());
        if taken.is_empty() {
            return Ok(0);
        }
        let rows: Vec<[i64; 3]> = taken.iter().map(|(&(tenant, id), &n)| [tenant, id, n]).collect();
        let written = match &self.pool {
            Pool::Postgres(pool) => {
                let column = |i: usize| rows.iter().map(|r| r[i]).collect::<Vec<_>>();
                sqlx::query(
                    "UPDATE agent_tool_executions AS e SET replay_count = e.replay_count + c.n
                     FROM UNNEST($1::BIGINT[], $2::BIGINT[], $3::BIGINT[]) AS c (tenant_id, id, n)
                     WHERE e.tenant_id = c.tenant_id AND e.id = c.id",
                )
                .bind(column(0))
                .bind(column(1))
                .bind(column(2))
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
            }
            Pool::Sqlite { write, .. } => sqlx::query(
                "UPDATE agent_tool_executions SET replay_count = replay_count + c.n
                     FROM (SELECT value ->> 0 AS tenant_id, value ->> 1 AS id, value ->> 2 AS n
                           FROM json_each($1)) AS c
                     WHERE agent_tool_executions.tenant_id = c.tenant_id AND agent_tool_executions.id = c.id",
            )
            .bind(sqlx::types::Json(&rows))
            .execute(write)
            .await
            .map(|r| r.rows_affected()),
        };
        match written {
            Ok(_) => Ok(taken.len()),
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
