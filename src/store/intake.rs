//! The intake's writes, alone or in a group commit (see `crate::inbound::group_commit`).
//!
//! A batch is one write transaction over the same statements a single message uses
//! (`record_in_tx!`, `apply_status_on!`), so batching changes when a commit happens, never what
//! is written: dedup stays the unique provider id, and a message's turn upsert stays in the
//! transaction that stores it.

use chrono::{DateTime, Utc};

use super::inbound::{bind_inbound, insert_inbound_sql, record_in_tx, upsert_turn_sql};
use super::outbox::apply_status_on;
use super::{Dialect, InboundStore, OutboxStore, Recorded, Store, StoreResult, writing};
use crate::inbound::{IntakeWrite, Written};
use crate::jobs::TurnTiming;

#[allow(async_fn_in_trait)]
pub trait IntakeStore {
    /// One write in a transaction of its own: the path without group commit.
    async fn write_intake(&self, write: &IntakeWrite, timing: &TurnTiming, now: DateTime<Utc>) -> StoreResult<Written>;
    /// Every write in one transaction, results in the order given. An error means nothing of
    /// the batch was written (the transaction rolled back).
    async fn write_intake_batch(
        &self,
        writes: &[&IntakeWrite],
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Written>>;
}

impl IntakeStore for Store {
    async fn write_intake(&self, write: &IntakeWrite, timing: &TurnTiming, now: DateTime<Utc>) -> StoreResult<Written> {
        Ok(match write {
            IntakeWrite::Message { tenant, conversation, message, kind } => {
                Written::Message(self.record_inbound_for(*tenant, *conversation, message, *kind, timing, now).await?)
            }
            IntakeWrite::Status { tenant, update } => Written::Status(self.apply_status(*tenant, update, now).await?),
        })
    }

    async fn write_intake_batch(
        &self,
        writes: &[&IntakeWrite],
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Written>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let mut written = Vec::with_capacity(writes.len());
            for write in writes {
                written.push(match write {
                    IntakeWrite::Message { tenant, conversation, message, kind } => {
                        let job = record_in_tx!(tx, tenant, conversation, message, *kind, timing, now)?;
                        Written::Message(match job {
                            Some(job) => Recorded::New { conversation: *conversation, job },
                            None => Recorded::Duplicate,
                        })
                    }
                    IntakeWrite::Status { tenant, update } => {
                        Written::Status(apply_status_on!(&mut *tx, tenant, update, now).await? > 0)
                    }
                });
            }
            tx.commit().await?;
            Ok(written)
        })
    }
}
