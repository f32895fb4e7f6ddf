//! The console's operations reads and its one repair: charges and their paid totals, pending
//! actions, dead jobs and failed sends, and sending a dead job back to the queue.
//!
//! Invariants: every statement names its tenant; a retry only ever moves a `dead` job of that
//! tenant, keeps its attempt count (attempt numbers fence ledger rows and outbox writes, so
//! they never go back) and grants it a fresh budget of attempts.

use chrono::{DateTime, Utc};

use super::agenda::{ActionEntry, action_entry_columns};
use crate::domain::{JobId, TenantId};
use crate::store::{Store, StoreResult, reading, writing};

/// A charge, as the console lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChargeEntry {
    pub id: i64,
    pub status: String,
    pub amount_cents: i64,
    pub description: String,
    pub customer_phone: String,
    pub customer: Option<String>,
    pub txid: String,
    pub gateway: String,
    pub appointment_id: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
    /// What refunds hold back (requested or done), and what was confirmed given back.
    pub refund_reserved_cents: i64,
    pub refunded_cents: i64,
}

/// A job that gave up.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeadJob {
    pub id: i64,
    pub conversation_id: i64,
    pub kind: String,
    pub attempts: i64,
    pub max_attempts: i64,
    pub last_error: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// A message the outbox could not deliver.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FailedSend {
    pub id: i64,
    pub conversation_id: i64,
    pub idempotency_key: String,
    pub status: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub updated_at: DateTime<Utc>,
}

/// What asking to retry a job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// It was dead and is runnable now.
    Requeued,
    /// It exists but is not dead (already retried, or never failed): nothing changed.
    NotDead,
    /// No such job for this tenant.
    Unknown,
}

/// A dead job retried from the console gets this many more attempts (not its whole budget
/// again, which would double on every retry).
const RETRY_ATTEMPTS: i64 = 3;

#[allow(async_fn_in_trait)]
pub trait ConsoleOpsStore {
    /// The newest `limit` charges, newest first.
    async fn charge_entries(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<ChargeEntry>>;
    /// When and how much each charge paid in `[from, to)` was.
    async fn paid_amounts(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(DateTime<Utc>, i64)>>;
    /// The newest `limit` pending actions (any status), newest first.
    async fn action_entries(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<ActionEntry>>;
    async fn dead_jobs(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<DeadJob>>;
    async fn failed_sends(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<FailedSend>>;
    /// Makes the tenant's dead job `id` runnable at `now`.
    async fn retry_dead_job(&self, tenant: TenantId, id: JobId, now: DateTime<Utc>) -> StoreResult<Retry>;
}

impl ConsoleOpsStore for Store {
    async fn charge_entries(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<ChargeEntry>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT ch.id, ch.status, ch.amount_cents, ch.description, ch.customer_phone,
                        c.profile_name AS customer, ch.txid, ch.gateway, ch.appointment_id, ch.created_at,
                        ch.paid_at, ch.refund_reserved_cents, ch.refunded_cents
                 FROM charges ch
                 LEFT JOIN conversations v ON v.id = ch.customer_conversation_id AND v.tenant_id = ch.tenant_id
                 LEFT JOIN contacts c ON c.id = v.contact_id AND c.tenant_id = ch.tenant_id
                 WHERE ch.tenant_id = $1
                 ORDER BY ch.created_at DESC, ch.id DESC LIMIT $2",
            )
            .bind(tenant.0)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn paid_amounts(
        &self,
        tenant: TenantId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> StoreResult<Vec<(DateTime<Utc>, i64)>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT paid_at, amount_cents FROM charges
                 WHERE tenant_id = $1 AND status = 'paid' AND paid_at >= $2 AND paid_at < $3
                 ORDER BY paid_at",
            )
            .bind(tenant.0)
            .bind(from)
            .bind(to)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn action_entries(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<ActionEntry>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ", action_entry_columns!(), "
                 FROM pending_actions p LEFT JOIN contacts d ON d.id = p.confirmed_by AND d.tenant_id = p.tenant_id
                 WHERE p.tenant_id = $1 ORDER BY p.created_at DESC, p.id DESC LIMIT $2"
            ))
            .bind(tenant.0)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn dead_jobs(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<DeadJob>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, conversation_id, kind, attempts, max_attempts, last_error, updated_at FROM jobs
                 WHERE tenant_id = $1 AND state = 'dead' ORDER BY updated_at DESC, id DESC LIMIT $2",
            )
            .bind(tenant.0)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn failed_sends(&self, tenant: TenantId, limit: i64) -> StoreResult<Vec<FailedSend>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, conversation_id, idempotency_key, status, attempts, last_error, updated_at
                 FROM outbound_messages
                 WHERE tenant_id = $1 AND status = 'failed' ORDER BY updated_at DESC, id DESC LIMIT $2",
            )
            .bind(tenant.0)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn retry_dead_job(&self, tenant: TenantId, id: JobId, now: DateTime<Utc>) -> StoreResult<Retry> {
        let moved = writing!(self, pool => {
            sqlx::query(
                "UPDATE jobs SET state = 'retryable', run_at = $1, max_attempts = attempts + $4,
                     locked_by = NULL, locked_until = NULL, finished_at = NULL, updated_at = $1
                 WHERE tenant_id = $2 AND id = $3 AND state = 'dead'",
            )
            .bind(now)
            .bind(tenant.0)
            .bind(id.0)
            .bind(RETRY_ATTEMPTS)
            .execute(pool)
            .await
            .map(crate::store::changed_one)
        })?;
        if moved {
            return Ok(Retry::Requeued);
        }
        let exists: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT id FROM jobs WHERE tenant_id = $1 AND id = $2")
                .bind(tenant.0)
                .bind(id.0)
                .fetch_optional(pool)
                .await
        })?;
        Ok(if exists.is_some() { Retry::NotDead } else { Retry::Unknown })
    }
}
