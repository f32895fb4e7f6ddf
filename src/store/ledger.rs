//! The ledger's statements. See `crate::ledger` for the invariants they uphold.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use super::tx::insert_new_execution;
use super::{Store, StoreResult, changed_one, reading, writing};
use crate::domain::{ContactId, ConversationId, JobId, LedgerKey, TenantId};
use crate::ledger::{ExecutionRecord, LedgerState};

/// The columns of [`ExecutionRecord`], for `SELECT` and `RETURNING`.
macro_rules! execution_columns {
    () => {
        "id, idempotency_key, tool, fingerprint, arguments, status, result, error, generation, \
         locked_until, replay_count, tool_use_id, turn_id, turn_attempt, created_at, reserved_by, completed_at"
    };
}
pub(crate) use execution_columns;

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
    /// Calls of `tool` left unsettled (a worker died mid-call, or the outcome is unknown) whose
    /// lease ran out by `now`, with their tenant and arguments, oldest first: what a sweep must
    /// finish although the thing it is about may no longer look due.
    async fn abandoned_calls(
        &self,
        tool: &str,
        now: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<(TenantId, serde_json::Value)>>;
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
        Ok(writing!(self, pool => {
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
            .map(changed_one)
        })?)
    }

    async fn settle_execution(
        &self,
        tenant: TenantId,
        id: i64,
        generation: i64,
        settlement: &Settlement<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let settled_now = writing!(self, pool => {
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
            .map(changed_one)
        })?;
        if settled_now {
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

    async fn abandoned_calls(
        &self,
        tool: &str,
        now: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<(TenantId, serde_json::Value)>> {
        let rows: Vec<(i64, Json<serde_json::Value>)> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT tenant_id, arguments FROM agent_tool_executions
                 WHERE tool = $1 AND status IN ('running', 'outcome_unknown')
                   AND (locked_until IS NULL OR locked_until <= $2)
                 ORDER BY id LIMIT $3",
            )
            .bind(tool)
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        Ok(rows.into_iter().map(|(tenant, arguments)| (TenantId(tenant), arguments.0)).collect())
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
