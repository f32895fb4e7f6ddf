//! The ledger's statements. See `crate::ledger` for the invariants they uphold.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::{Store, StoreResult, reading, writing};
use crate::domain::LedgerKey;
use crate::domain::{ContactId, ConversationId, JobId, TenantId};
use crate::ledger::{ExecutionRecord, LedgerState};

/// The columns of [`ExecutionRecord`], for `SELECT` and `RETURNING`.
macro_rules! execution_columns {
    () => {
        "id, idempotency_key, tool, fingerprint, arguments, status, result, error, generation, \
         locked_until, replay_count, tool_use_id, turn_id, turn_attempt, created_at, reserved_by"
    };
}

/// The insert of `$new` as a new row when its key has none, `RETURNING id` (no row when the
/// key is taken). `$1`…`$12` are bound from the [`NewExecution`] (`$10` a fresh token for
/// `reserved_by`, `$11` the time `$now`, `$12` the turn's attempt); `$columns` and `$values`
/// add what a path sets beyond them (the caller binds `$13` on).
macro_rules! insert_new_execution {
    ($columns:literal, $values:literal, $new:expr, $now:expr) => {
        sqlx::query_scalar::<_, i64>(concat!(
            "INSERT INTO agent_tool_executions
                 (tenant_id, idempotency_key, tool, fingerprint, arguments, conversation_id, contact_id, turn_id,
                  tool_use_id, reserved_by, status, generation, locked_until, replay_count, created_at, updated_at,
                  turn_attempt",
            $columns,
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, ",
            $values,
            ") ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING id"
        ))
        .bind($new.tenant.0)
        .bind($new.key.as_str())
        .bind($new.tool)
        .bind($new.fingerprint)
        .bind(sqlx::types::Json($new.arguments))
        .bind($new.conversation.0)
        .bind($new.contact.0)
        .bind($new.turn.map(|t| t.0))
        .bind($new.tool_use_id)
        .bind(uuid::Uuid::new_v4().to_string())
        .bind($now)
        .bind($new.turn_attempt)
    };
}

/// Inside a write transaction, before the effect: the row `fence` holds (see
/// `crate::ledger::fence`), or `None` when it no longer holds it. A held row is re-checked at
/// its generation, which on PostgreSQL locks it until the transaction ends, so no takeover
/// slips in before the commit. A claim inserts the row, running, in this transaction; a
/// concurrent claim of the same key waits on the unique index and then finds it taken.
macro_rules! hold_fence {
    ($tx:expr, $tenant:expr, $fence:expr) => {
        match $fence {
            $crate::ledger::Fence::Held(held) => sqlx::query(
                "UPDATE agent_tool_executions SET generation = generation
                 WHERE tenant_id = $1 AND id = $2 AND generation = $3 AND status = 'running'",
            )
            .bind($tenant.0)
            .bind(held.execution)
            .bind(held.generation)
            .execute(&mut *$tx)
            .await
            .map(|r| (r.rows_affected() == 1).then_some(held)),
            $crate::ledger::Fence::Claim(claim) => $crate::store::ledger::insert_new_execution!(
                "",
                "'running', 1, NULL, 0, $11, $11, $12",
                claim.new,
                claim.now
            )
            .fetch_optional(&mut *$tx)
            .await
            .map(|id| match id {
                Some(execution) => Some($crate::ledger::Held { execution, generation: 1 }),
                None => {
                    claim.mark_lost();
                    None
                }
            }),
        }
    };
}
pub(crate) use {hold_fence, insert_new_execution};

/// Inside a write transaction: settles the row `held` as succeeded with `result`, recording
/// what its effect is about; false when the fence no longer holds. Once the transaction has
/// committed, the caller marks its fence settled ([`crate::ledger::Fence::mark_settled`]).
macro_rules! settle_in_tx {
    ($tx:expr, $tenant:expr, $held:expr, $subject:expr, $result:expr, $now:expr) => {
        sqlx::query(
            "UPDATE agent_tool_executions SET status = 'succeeded', result = $1, error = NULL, subject = $2,
                 locked_until = NULL, updated_at = $3, completed_at = $3
             WHERE tenant_id = $4 AND id = $5 AND generation = $6 AND status = 'running'",
        )
        .bind(sqlx::types::Json($result))
        .bind($subject)
        .bind($now)
        .bind($tenant.0)
        .bind($held.execution)
        .bind($held.generation)
        .execute(&mut *$tx)
        .await
        .map(|r| r.rows_affected() == 1)
    };
}
pub(crate) use settle_in_tx;

/// Inside a write transaction: supersedes every succeeded row about `subject` (or, for rows
/// written before subjects existed, under `key`), except the row `except` holds: the thing
/// they describe changed, so a repeat of any of them runs again instead of replaying.
macro_rules! supersede_subject {
    ($tx:expr, $tenant:expr, $subject:expr, $key:expr, $except:expr, $now:expr) => {
        sqlx::query(
            "UPDATE agent_tool_executions SET status = 'superseded', updated_at = $1
             WHERE tenant_id = $2 AND status = 'succeeded' AND id <> $5
               AND (subject = $3 OR idempotency_key = $4)",
        )
        .bind($now)
        .bind($tenant.0)
        .bind($subject)
        .bind($key)
        .bind($except.map_or(0_i64, |h: crate::ledger::Held| h.execution))
        .execute(&mut *$tx)
        .await
    };
}
pub(crate) use supersede_subject;

/// A reservation to insert.
#[derive(Debug, Clone)]
pub struct NewExecution<'a> {
    pub tenant: TenantId,
    pub key: &'a LedgerKey,
    pub tool: &'a str,
    pub fingerprint: &'a str,
    pub arguments: &'a Value,
    pub conversation: ConversationId,
    pub contact: ContactId,
    pub turn: Option<JobId>,
    pub tool_use_id: Option<&'a str>,
    pub turn_attempt: Option<i64>,
}

/// A takeover of row `id` as seen at `generation`, by a call with these arguments.
#[derive(Debug, Clone)]
pub struct TakeOver<'a> {
    pub tenant: TenantId,
    pub id: i64,
    pub generation: i64,
    pub fingerprint: &'a str,
    pub arguments: &'a Value,
    pub turn: Option<JobId>,
    pub turn_attempt: Option<i64>,
}

/// How an attempt ended.
#[derive(Debug, Clone)]
pub struct Settlement<'a> {
    pub state: LedgerState,
    pub result: Option<&'a Value>,
    pub error: Option<&'a str>,
}

#[allow(async_fn_in_trait)]
pub trait LedgerStore {
    /// One durable statement: inserts a `running` row holding the lease at generation 1 and
    /// returns its id; `None` (nothing written) when the key has a row already.
    async fn reserve_execution(
        &self,
        new: &NewExecution<'_>,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<i64>>;
    async fn execution(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<ExecutionRecord>>;
    /// The row of `key` as stored, by one read, its repeat counted in memory (see
    /// `store::replays`; the row's own `replay_count` leaves pending counts out); `None` when
    /// there is none. Nothing is written either way.
    async fn probe_execution(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<ExecutionRecord>>;
    /// Inserts `new` already settled (a local effect's outcome when its handler wrote nothing
    /// under the claim); returns its id, or `None` when the key has a row already.
    async fn insert_settled_execution(
        &self,
        new: &NewExecution<'_>,
        settlement: &Settlement<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<i64>>;
    /// Takes over an expired attempt (or one left running by an earlier attempt of the same
    /// turn), a transient failure, an unknown outcome, a released key, or a permanent failure
    /// when the request changed, seen at `generation`; returns the new generation, or `None`
    /// when another worker won.
    async fn take_over_execution(
        &self,
        takeover: &TakeOver<'_>,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<i64>>;
    /// Extends the lease; only the holder of `generation` can.
    async fn renew_execution(
        &self,
        tenant: TenantId,
        id: i64,
        generation: i64,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Stores the outcome; false when `generation` no longer holds the row. A row this
    /// generation already settled (the atomic phase stored the outcome with the effect) is left
    /// as it is and counts as stored: a takeover would have bumped the generation.
    async fn settle_execution(
        &self,
        tenant: TenantId,
        id: i64,
        generation: i64,
        settlement: &Settlement<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The conversation's writes, oldest first.
    async fn executions_of_conversation(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Vec<ExecutionRecord>>;
    /// Deletes settled rows older than `before`; running and unknown rows are kept.
    async fn prune_executions(&self, before: DateTime<Utc>) -> StoreResult<u64>;
}

impl LedgerStore for Store {
    async fn reserve_execution(
        &self,
        new: &NewExecution<'_>,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        Ok(writing!(self, pool => {
            insert_new_execution!("", "'running', 1, $13, 0, $11, $11, $12", new, now)
            .bind(lease_until)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn execution(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<ExecutionRecord>> {
        let _gate = self.replays.read_gate().await;
        let mut row = self.read_execution(tenant, key).await?;
        self.replays.add_pending(tenant, row.iter_mut().map(|r| (r.id, &mut r.replay_count)));
        Ok(row)
    }

    async fn probe_execution(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<ExecutionRecord>> {
        let row = self.read_execution(tenant, key).await?;
        if let Some(row) = &row {
            self.replays.record(tenant, row.id);
        }
        Ok(row)
    }

    async fn insert_settled_execution(
        &self,
        new: &NewExecution<'_>,
        settlement: &Settlement<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        Ok(writing!(self, pool => {
            insert_new_execution!(
                ", result, error, completed_at",
                "$13, 1, NULL, 0, $11, $11, $12, $14, $15, $11",
                new,
                now
            )
            .bind(settlement.state.as_str())
            .bind(settlement.result.map(Json))
            .bind(settlement.error)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn take_over_execution(
        &self,
        t: &TakeOver<'_>,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        Ok(writing!(self, pool => {
            sqlx::query_scalar(
                "UPDATE agent_tool_executions SET
                     generation = generation + 1, status = 'running', locked_until = $1, updated_at = $2,
                     fingerprint = $3, arguments = $4, turn_id = $8, turn_attempt = $9
                 WHERE tenant_id = $5 AND id = $6 AND generation = $7
                   AND (status IN ('failed_transient', 'outcome_unknown', 'superseded', 'refused')
                        OR (status = 'running' AND locked_until <= $2)
                        OR (status = 'running' AND turn_id = $8 AND turn_attempt < $9)
                        OR (status = 'failed_permanent' AND fingerprint <> $3))
                   AND NOT COALESCE(turn_id = $8 AND turn_attempt > $9, FALSE)
                 RETURNING generation",
            )
            .bind(lease_until)
            .bind(now)
            .bind(t.fingerprint)
            .bind(Json(t.arguments))
            .bind(t.tenant.0)
            .bind(t.id)
            .bind(t.generation)
            .bind(t.turn.map(|t| t.0))
            .bind(t.turn_attempt)
            .fetch_optional(pool)
            .await
        })?)
    }

    async fn renew_execution(
        &self,
        tenant: TenantId,
        id: i64,
        generation: i64,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let n = writing!(self, pool => {
            sqlx::query(
                "UPDATE agent_tool_executions SET locked_until = $1, updated_at = $2
                 WHERE tenant_id = $3 AND id = $4 AND generation = $5 AND status = 'running' AND locked_until > $2",
            )
            .bind(until)
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .bind(generation)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(n == 1)
    }

    async fn settle_execution(
        &self,
        tenant: TenantId,
        id: i64,
        generation: i64,
        settlement: &Settlement<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let n = writing!(self, pool => {
            sqlx::query(
                "UPDATE agent_tool_executions SET status = $1, result = $2, error = $3, locked_until = NULL,
                     updated_at = $4, completed_at = $4
                 WHERE tenant_id = $5 AND id = $6 AND generation = $7 AND status = 'running'",
            )
            .bind(settlement.state.as_str())
            .bind(settlement.result.map(Json))
            .bind(settlement.error)
            .bind(now)
            .bind(tenant.0)
            .bind(id)
            .bind(generation)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        if n == 1 {
            return Ok(true);
        }
        let settled: Option<i32> = reading!(self, pool => {
            sqlx::query_scalar(
                "SELECT 1 FROM agent_tool_executions
                 WHERE tenant_id = $1 AND id = $2 AND generation = $3 AND status <> 'running'",
            )
            .bind(tenant.0)
            .bind(id)
            .bind(generation)
            .fetch_optional(pool)
            .await
        })?;
        Ok(settled.is_some())
    }

    async fn executions_of_conversation(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Vec<ExecutionRecord>> {
        let _gate = self.replays.read_gate().await;
        let mut rows: Vec<ExecutionRecord> = reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", execution_columns!(), "
                 FROM agent_tool_executions WHERE tenant_id = $1 AND conversation_id = $2 ORDER BY id"),
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .fetch_all(pool)
            .await
        })?;
        self.replays.add_pending(tenant, rows.iter_mut().map(|r| (r.id, &mut r.replay_count)));
        Ok(rows)
    }

    async fn prune_executions(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "DELETE FROM agent_tool_executions
                 WHERE status IN ('succeeded', 'failed_permanent', 'failed_transient', 'superseded', 'refused')
                   AND updated_at < $1",
            )
            .bind(before)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?)
    }
}

impl Store {
    /// The row of `key` as stored.
    async fn read_execution(&self, tenant: TenantId, key: &LedgerKey) -> StoreResult<Option<ExecutionRecord>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", execution_columns!(), "
                 FROM agent_tool_executions WHERE tenant_id = $1 AND idempotency_key = $2"),
            )
            .bind(tenant.0)
            .bind(key.as_str())
            .fetch_optional(pool)
            .await
        })?)
    }
}
