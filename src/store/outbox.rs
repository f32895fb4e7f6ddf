//! The outbox's statements. See `crate::outbox` for the invariants they uphold.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::tx::{apply_status_on, handed_off, hold_job_lease, insert_outbound};
use super::{
    ClaimedOutbound, Dialect, NewOutbound, OutboundRecord, Store, StoreError, StoreResult, changed_one, reading,
    writing,
};
use crate::domain::{OutboundId, PhoneE164, TenantId};
use crate::whatsapp::webhook::StatusUpdate;
use crate::whatsapp::{OutboundMessage, Recipient};

/// The columns of [`OutboundRecord`].
macro_rules! record_columns {
    () => {
        "id, conversation_id, idempotency_key, status, message, provider_message_id, attempts, last_error, created_at"
    };
}

#[allow(async_fn_in_trait)]
pub trait OutboxStore {
    /// Inserts the reply unless its key exists; `None` means it was already there.
    async fn enqueue_outbound(&self, new: &NewOutbound, now: DateTime<Utc>) -> StoreResult<Option<OutboundId>>;
    /// Claims the next due row (pending, or sending/unknown whose grace ran out), oldest first
    /// within its conversation. The claim itself sets the next attempt to `grace_until`, so a
    /// sender that dies mid-request leaves a row that waits for a status webhook first.
    async fn claim_outbound(
        &self,
        now: DateTime<Utc>,
        grace_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedOutbound>>;
    /// Records Meta's wamid. Never moves a row backwards if a status webhook came first.
    async fn mark_sent(&self, tenant: TenantId, id: OutboundId, wamid: &str, now: DateTime<Utc>) -> StoreResult<()>;
    /// Ends the attempt as `pending` (not sent, retry at `next_at`) or `unknown` (maybe sent).
    async fn reschedule_outbound(
        &self,
        claimed: &ClaimedOutbound,
        status: RescheduleAs,
        reason: &str,
        next_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    async fn mark_outbound_failed(
        &self,
        claimed: &ClaimedOutbound,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Applies a status webhook, matched by wamid or by our key; forward-only.
    async fn apply_status(&self, tenant: TenantId, update: &StatusUpdate, now: DateTime<Utc>) -> StoreResult<bool>;
    /// The tenant's outbox, oldest first.
    async fn list_outbound(&self, tenant: TenantId) -> StoreResult<Vec<OutboundRecord>>;
    /// Replies to one contact (by `wa_id` digits) with an id above `after`, oldest first.
    async fn outbound_for_wa_id(&self, tenant: TenantId, wa_id: &str, after: i64) -> StoreResult<Vec<OutboundRecord>>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RescheduleAs {
    Pending,
    Unknown,
}

macro_rules! claim_outbound_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE outbound_messages SET status = 'sending', attempts = attempts + 1, next_attempt_at = $1,
                 updated_at = $2
             WHERE id = (
                 SELECT o.id FROM outbound_messages o
                 WHERE o.status IN ('pending', 'sending', 'unknown') AND o.next_attempt_at <= $2
                   AND NOT EXISTS (
                       SELECT 1 FROM conversations v JOIN contacts c ON c.tenant_id = v.tenant_id AND c.id = v.contact_id
                       WHERE v.tenant_id = o.tenant_id AND v.id = o.conversation_id AND c.erased_at IS NOT NULL)
                   AND NOT EXISTS (
                       SELECT 1 FROM outbound_messages p
                       WHERE p.conversation_id = o.conversation_id AND p.id < o.id
                         AND p.status IN ('pending', 'sending', 'unknown'))
                 ORDER BY o.next_attempt_at, o.id
                 LIMIT 1 ",
            $lock,
            ")
             RETURNING id, tenant_id, idempotency_key, to_wa_id, to_user_id, message, attempts"
        )
    };
}

type ClaimRow = (i64, i64, String, Option<String>, Option<String>, Json<OutboundMessage>, i64);

impl OutboxStore for Store {
    async fn enqueue_outbound(&self, new: &NewOutbound, now: DateTime<Utc>) -> StoreResult<Option<OutboundId>> {
        let id: Option<i64> = writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            if let Some(lease) = &new.written_by
                && !hold_job_lease!(tx, lease, now)?
            {
                return Err(StoreError::LeaseLost);
            }
            if new.unless_handed_off && handed_off!(tx, new, now)? {
                return Ok(None);
            }
            let id: Option<i64> = insert_outbound!(tx, new, now)?;
            tx.commit().await?;
            id
        });
        Ok(id.map(OutboundId))
    }

    async fn claim_outbound(
        &self,
        now: DateTime<Utc>,
        grace_until: DateTime<Utc>,
    ) -> StoreResult<Option<ClaimedOutbound>> {
        if !self.is_due(super::due::Queue::Outbound, now).await? {
            return Ok(None);
        }
        let row: Option<ClaimRow> = writing!(self, pool => {
            // One statement: atomic on both engines.
            let sql = pool.pick(claim_outbound_sql!(""), claim_outbound_sql!("FOR UPDATE SKIP LOCKED"));
            sqlx::query_as(sql).bind(grace_until).bind(now).fetch_optional(pool).await
        })?;
        let Some((id, tenant, key, wa_id, user_id, message, attempt)) = row else {
            return Ok(None);
        };
        let wa_id = wa_id.map(|w| PhoneE164::parse(&w).map_err(|e| StoreError::Corrupt(e.to_string()))).transpose()?;
        Ok(Some(ClaimedOutbound {
            id: OutboundId(id),
            tenant: TenantId(tenant),
            key,
            recipient: Recipient { wa_id, user_id },
            message,
            attempt,
        }))
    }

    async fn mark_sent(&self, tenant: TenantId, id: OutboundId, wamid: &str, now: DateTime<Utc>) -> StoreResult<()> {
        writing!(self, pool => {
            sqlx::query(
                "UPDATE outbound_messages SET
                     status = CASE WHEN status IN ('pending', 'sending', 'unknown') THEN 'sent' ELSE status END,
                     provider_message_id = COALESCE(provider_message_id, $1),
                     sent_at = COALESCE(sent_at, $2), updated_at = $2, last_error = NULL
                 WHERE tenant_id = $3 AND id = $4",
            )
            .bind(wamid)
            .bind(now)
            .bind(tenant.0)
            .bind(id.0)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    async fn reschedule_outbound(
        &self,
        claimed: &ClaimedOutbound,
        status: RescheduleAs,
        reason: &str,
        next_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let status = match status {
            RescheduleAs::Pending => "pending",
            RescheduleAs::Unknown => "unknown",
        };
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE outbound_messages SET status = $1, last_error = $2, next_attempt_at = $3, updated_at = $4
                 WHERE tenant_id = $5 AND id = $6 AND attempts = $7 AND status = 'sending'",
            )
            .bind(status)
            .bind(reason)
            .bind(next_at)
            .bind(now)
            .bind(claimed.tenant.0)
            .bind(claimed.id.0)
            .bind(claimed.attempt)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn mark_outbound_failed(
        &self,
        claimed: &ClaimedOutbound,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE outbound_messages SET status = 'failed', last_error = $1, updated_at = $2
                 WHERE tenant_id = $3 AND id = $4 AND attempts = $5 AND status = 'sending'",
            )
            .bind(reason)
            .bind(now)
            .bind(claimed.tenant.0)
            .bind(claimed.id.0)
            .bind(claimed.attempt)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn apply_status(&self, tenant: TenantId, update: &StatusUpdate, now: DateTime<Utc>) -> StoreResult<bool> {
        let n = writing!(self, pool => apply_status_on!(pool, tenant, update, now).await)?;
        Ok(n > 0)
    }

    async fn list_outbound(&self, tenant: TenantId) -> StoreResult<Vec<OutboundRecord>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", record_columns!(), "
                 FROM outbound_messages WHERE tenant_id = $1 ORDER BY id"),
            )
            .bind(tenant.0)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn outbound_for_wa_id(&self, tenant: TenantId, wa_id: &str, after: i64) -> StoreResult<Vec<OutboundRecord>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                concat!("SELECT ", record_columns!(), "
                 FROM outbound_messages WHERE tenant_id = $1 AND to_wa_id = $2 AND id > $3 ORDER BY id"),
            )
            .bind(tenant.0)
            .bind(wa_id)
            .bind(after)
            .fetch_all(pool)
            .await
        })?)
    }
}
