//! The turn queue's statements. See `crate::jobs` for the invariants they uphold.

use chrono::{DateTime, Utc};

use super::tx::{handed_off, insert_history, insert_outbound};
use super::{
    ClaimedJob, Dialect, FailOutcome, JobKind, JobSnapshot, JobState, Lease, Pool, Store, StoreError, StoreResult,
    changed_one, reading, writing,
};
use crate::domain::{ConversationId, JobId, TenantId};
use crate::jobs::TurnEnd;

/// The columns of [`JobSnapshot`].
macro_rules! snapshot_columns {
    () => {
        "id, tenant_id, conversation_id, state, run_at, attempts, max_attempts, locked_by, last_error, trigger_message_id"
    };
}

/// Marks the job completed while `lease` is held; true when it did. The same condition as
/// [`hold_job_lease`], so inside a transaction it is the lease check too (and on PostgreSQL it
/// locks the job row until the commit just the same).
macro_rules! complete_job {
    ($executor:expr, $lease:expr, $now:expr) => {
        sqlx::query(
            "UPDATE jobs SET state = 'completed', finished_at = $1, updated_at = $1,
                 locked_by = NULL, locked_until = NULL
             WHERE id = $2 AND state = 'running' AND locked_by = $3 AND attempts = $4 AND locked_until > $1",
        )
        .bind($now)
        .bind($lease.job.0)
        .bind(&$lease.worker)
        .bind($lease.attempt)
        .execute($executor)
        .await
        .map(changed_one)
    };
}

/// What a claim returns: id, tenant, conversation, attempt, max attempts, trigger, kind.
type ClaimRow = (i64, i64, i64, i64, i64, Option<String>, String);

#[allow(async_fn_in_trait)]
pub trait JobStore {
    /// Claims the next due job whose conversation has nothing running and nothing older
    /// pending. On the first claim it fixes the turn's messages and trigger.
    async fn claim_next(
        &self,
        worker: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedJob>>;
    /// Extends the lease; false when it was lost.
    async fn heartbeat(&self, lease: &Lease, now: DateTime<Utc>, until: DateTime<Utc>) -> StoreResult<bool>;
    /// Marks the job done; false when the lease was lost (nothing changes then).
    async fn complete(&self, lease: &Lease, now: DateTime<Utc>) -> StoreResult<bool>;
    /// A turn's end, in one transaction: marks the job done and writes what the turn staged
    /// (replies unless their key exists or, for replies that yield to a person, while a person
    /// has the conversation; history and model calls unless already there). `None` when the
    /// lease was lost: nothing is written then. The lease is checked at `now` (the worker's
    /// clock, which tests move ahead); rows are stamped `written_at` (the database's wall
    /// clock, so a reply is due for the sender at once).
    async fn finish_turn(
        &self,
        lease: &Lease,
        end: &TurnEnd,
        now: DateTime<Utc>,
        written_at: DateTime<Utc>,
    ) -> StoreResult<Option<TurnFinished>>;
    /// Schedules a retry at `retry_at`, or buries the job when attempts are exhausted or the
    /// failure is permanent; `None` when the lease was lost.
    async fn fail(
        &self,
        lease: &Lease,
        error: &str,
        permanent: bool,
        retry_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<FailOutcome>>;
    /// Returns expired running jobs to `retryable` (or `dead` without attempts left).
    async fn reap_expired(&self, now: DateTime<Utc>) -> StoreResult<Vec<(JobId, JobState)>>;
    /// Deletes completed and dead jobs finished before `before`.
    async fn prune_finished(&self, before: DateTime<Utc>) -> StoreResult<u64>;
    async fn job(&self, tenant: TenantId, id: JobId) -> StoreResult<Option<JobSnapshot>>;
    async fn jobs_of_conversation(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Vec<JobSnapshot>>;
    async fn count_jobs(&self, tenant: TenantId) -> StoreResult<i64>;
    /// Jobs a worker could claim at `now` (available or retryable and due), across tenants, for
    /// the `/metrics` gauges.
    async fn runnable_jobs(&self, now: DateTime<Utc>) -> StoreResult<RunnableJobs>;
}

/// What a turn's end wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnFinished {
    /// Replies inserted for the outbox sender to send (not local, not there before): the
    /// caller wakes the sender when there are any.
    pub to_send: usize,
}

/// The runnable part of the queue at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnableJobs {
    pub count: i64,
    /// When the longest-waiting runnable job became due; `None` when there is none.
    pub oldest_due: Option<DateTime<Utc>>,
}

/// The next runnable job: a conversation runs one job at a time, and a click goes before any
/// turn of its conversation. `$now` is the placeholder of the instant, `$lock` PostgreSQL's row
/// lock (SQLite has one writer).
macro_rules! next_job_sql {
    ($now:literal, $lock:literal) => {
        concat!(
            "SELECT j.id FROM jobs j
             WHERE j.state IN ('available', 'retryable') AND j.run_at <= ",
            $now,
            "
               AND NOT EXISTS (
                   SELECT 1 FROM jobs r
                   WHERE r.conversation_id = j.conversation_id AND r.id <> j.id
                     AND (j.kind = 'turn' OR r.kind = 'click')
                     AND (r.state = 'running' OR (r.state IN ('available', 'retryable') AND r.id < j.id)))
             ORDER BY j.run_at, j.id
             LIMIT 1 ",
            $lock
        )
    };
}

/// SQLite's claim: the next runnable job, taken.
const SQLITE_CLAIM_SQL: &str = concat!(
    "UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_by = $1, locked_until = $2, updated_at = $3
     WHERE id = (",
    next_job_sql!("$3", ""),
    ") RETURNING id, tenant_id, conversation_id, attempts, max_attempts, trigger_message_id, kind"
);

/// PostgreSQL's claim, after the job `$1` is locked: on a first claim of a turn, the messages
/// no turn has taken are taken and the latest is the trigger, set in the job's one update
/// (`attempts` in `SET` and in `taken` is the value before the increment).
const POSTGRES_TAKE_SQL: &str = "WITH taken AS (
         UPDATE inbound_messages m SET turn_id = j.id FROM jobs j
         WHERE j.id = $1 AND j.attempts = 0 AND j.kind = 'turn'
           AND m.tenant_id = j.tenant_id AND m.conversation_id = j.conversation_id AND m.turn_id IS NULL
         RETURNING m.id, m.provider_message_id
     )
     UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_by = $2, locked_until = $3, updated_at = $4,
         trigger_message_id = CASE WHEN attempts = 0 AND kind = 'turn'
             THEN (SELECT provider_message_id FROM taken ORDER BY id DESC LIMIT 1)
             ELSE trigger_message_id END
     WHERE id = $1
     RETURNING id, tenant_id, conversation_id, attempts, max_attempts, trigger_message_id, kind";

impl JobStore for Store {
    async fn claim_next(
        &self,
        worker: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedJob>> {
        // Idle workers poll; a read keeps them off SQLite's single write lock.
        if !self.is_due(super::due::Queue::Jobs, now).await? {
            return Ok(None);
        }
        let row: Option<ClaimRow> = match &self.pool {
            // Two statements. The first locks the job; the second, which starts after the lock
            // is held, takes the messages and updates the job once. Its snapshot sees a message
            // the intake committed after the first statement began (bumping this job rather
            // than making another): under the first statement's snapshot that message would be
            // left untaken. One update of the job row: a second one in the same transaction made
            // PostgreSQL check the row's foreign keys again (a row version this transaction
            // wrote), waiting for a share lock on the conversation the intake may hold while it
            // waits for this job row, a deadlock.
            Pool::Postgres(pool) => {
                let mut tx = pool.begin_write().await?;
                let next: Option<i64> = sqlx::query_scalar(next_job_sql!("$1", "FOR UPDATE SKIP LOCKED"))
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(id) = next else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                let row: ClaimRow = sqlx::query_as(POSTGRES_TAKE_SQL)
                    .bind(id)
                    .bind(worker)
                    .bind(lease_until)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                Some(row)
            }
            // No data-modifying CTEs: the same steps in one transaction (one writer at a time).
            Pool::Sqlite { write: pool, .. } => {
                let mut tx = pool.begin_write().await?;
                let row: Option<ClaimRow> = sqlx::query_as(SQLITE_CLAIM_SQL)
                    .bind(worker)
                    .bind(lease_until)
                    .bind(now)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some((id, tenant, conversation, attempt, max_attempts, mut trigger, kind)) = row else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                if attempt == 1 && kind == "turn" {
                    // First claim: the turn takes every message of the conversation not yet
                    // answered; retries keep exactly this set. (A click job was created with
                    // its one message.)
                    sqlx::query(
                        "UPDATE inbound_messages SET turn_id = $1
                         WHERE tenant_id = $2 AND conversation_id = $3 AND turn_id IS NULL",
                    )
                    .bind(id)
                    .bind(tenant)
                    .bind(conversation)
                    .execute(&mut *tx)
                    .await?;
                    trigger = sqlx::query_scalar(
                        "UPDATE jobs SET trigger_message_id = (
                             SELECT provider_message_id FROM inbound_messages
                             WHERE tenant_id = $2 AND turn_id = $1 ORDER BY id DESC LIMIT 1)
                         WHERE id = $1 AND tenant_id = $2
                         RETURNING trigger_message_id",
                    )
                    .bind(id)
                    .bind(tenant)
                    .fetch_one(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Some((id, tenant, conversation, attempt, max_attempts, trigger, kind))
            }
        };
        let Some((id, tenant, conversation, attempt, max_attempts, trigger, kind)) = row else {
            return Ok(None);
        };
        let kind = JobKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("job {id} has kind {kind:?}")))?;
        Ok(Some(ClaimedJob {
            id: JobId(id),
            kind,
            tenant: TenantId(tenant),
            conversation: ConversationId(conversation),
            attempt,
            max_attempts,
            trigger_message_id: trigger,
            lease: Lease { job: JobId(id), worker: worker.to_owned(), attempt },
            locked_until: lease_until,
        }))
    }

    async fn heartbeat(&self, lease: &Lease, now: DateTime<Utc>, until: DateTime<Utc>) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE jobs SET locked_until = $1, updated_at = $2
                 WHERE id = $3 AND state = 'running' AND locked_by = $4 AND attempts = $5 AND locked_until > $2",
            )
            .bind(until)
            .bind(now)
            .bind(lease.job.0)
            .bind(&lease.worker)
            .bind(lease.attempt)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn complete(&self, lease: &Lease, now: DateTime<Utc>) -> StoreResult<bool> {
        Ok(writing!(self, pool => complete_job!(pool, lease, now))?)
    }

    async fn finish_turn(
        &self,
        lease: &Lease,
        end: &TurnEnd,
        now: DateTime<Utc>,
        written_at: DateTime<Utc>,
    ) -> StoreResult<Option<TurnFinished>> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The completion first: it is the lease check, and on PostgreSQL it locks the job
            // row, so the reaper cannot take the turn between this check and the commit.
            if !complete_job!(&mut *tx, lease, now)? {
                tx.rollback().await?;
                return Ok(None);
            }
            let mut to_send = 0;
            for reply in &end.replies {
                if reply.unless_handed_off && handed_off!(tx, reply, written_at)? {
                    continue;
                }
                let id: Option<i64> = insert_outbound!(tx, reply, written_at)?;
                to_send += usize::from(id.is_some() && !reply.local);
            }
            if let Some(h) = &end.history {
                let (tenant, conversation, turn, attempt) = (end.tenant, end.conversation, lease.job, Some(lease.attempt));
                insert_history!(tx, tenant, conversation, turn, attempt, &h.provider, h.messages, &h.calls, written_at)?;
            }
            tx.commit().await?;
            Ok(Some(TurnFinished { to_send }))
        })
    }

    async fn fail(
        &self,
        lease: &Lease,
        error: &str,
        permanent: bool,
        retry_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<FailOutcome>> {
        let state: Option<String> = writing!(self, pool => {
            sqlx::query_scalar(
                "UPDATE jobs SET
                     state = CASE WHEN $1 OR attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,
                     finished_at = CASE WHEN $1 OR attempts >= max_attempts THEN $2 ELSE NULL END,
                     run_at = $3, last_error = $4, updated_at = $2, locked_by = NULL, locked_until = NULL
                 WHERE id = $5 AND state = 'running' AND locked_by = $6 AND attempts = $7 AND locked_until > $2
                 RETURNING state",
            )
            .bind(permanent)
            .bind(now)
            .bind(retry_at)
            .bind(error)
            .bind(lease.job.0)
            .bind(&lease.worker)
            .bind(lease.attempt)
            .fetch_optional(pool)
            .await
        })?;
        Ok(state.map(|s| if s == "dead" { FailOutcome::Dead } else { FailOutcome::WillRetry }))
    }

    async fn reap_expired(&self, now: DateTime<Utc>) -> StoreResult<Vec<(JobId, JobState)>> {
        let rows: Vec<(i64, String)> = writing!(self, pool => {
            sqlx::query_as(
                "UPDATE jobs SET
                     state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'retryable' END,
                     finished_at = CASE WHEN attempts >= max_attempts THEN $1 ELSE NULL END,
                     run_at = $1, updated_at = $1, locked_by = NULL, locked_until = NULL,
                     last_error = 'lease expired: the worker stopped renewing it'
                 WHERE state = 'running' AND locked_until <= $1
                 RETURNING id, state",
            )
            .bind(now)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows
            .into_iter()
            .map(|(id, state)| (JobId(id), JobState::parse(&state).unwrap_or(JobState::Retryable)))
            .collect())
    }

    async fn prune_finished(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        let n = writing!(self, pool => {
            sqlx::query("DELETE FROM jobs WHERE state IN ('completed', 'dead') AND finished_at < $1")
                .bind(before)
                .execute(pool)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(n)
    }

    async fn job(&self, tenant: TenantId, id: JobId) -> StoreResult<Option<JobSnapshot>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", snapshot_columns!(), "
                 FROM jobs WHERE tenant_id = $1 AND id = $2"),
            )
            .bind(tenant.0)
            .bind(id.0)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn jobs_of_conversation(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Vec<JobSnapshot>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", snapshot_columns!(), "
                 FROM jobs WHERE tenant_id = $1 AND conversation_id = $2 ORDER BY id"),
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn count_jobs(&self, tenant: TenantId) -> StoreResult<i64> {
        Ok(reading!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE tenant_id = $1")
                .bind(tenant.0)
                .fetch_one(pool)
                .await
        })?)
    }

    async fn runnable_jobs(&self, now: DateTime<Utc>) -> StoreResult<RunnableJobs> {
        // The due test of a claim (without its one-per-conversation rule); `jobs_due` covers it.
        let (count, oldest_due): (i64, Option<DateTime<Utc>>) = reading!(self, pool => {
            sqlx::query_as(
                "SELECT COUNT(*), MIN(run_at) FROM jobs WHERE state IN ('available', 'retryable') AND run_at <= $1",
            )
            .bind(now)
            .fetch_one(pool)
            .await
        })?;
        Ok(RunnableJobs { count, oldest_due })
    }
}
