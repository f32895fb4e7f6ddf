//! Human handoff on a conversation: while `handoff_until` is in the future the bot does not
//! answer; `handoff_requested_at` marks a customer who asked for a person.
//!
//! Invariants: every statement names its tenant; extending a handoff never revives one that
//! already ended, nor moves its end backwards.

use chrono::{DateTime, Utc};

use super::{Store, StoreError, StoreResult, changed_one, reading, writing};
use crate::domain::{ConversationId, TenantId};

/// A conversation's handoff columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct HandoffState {
    pub handoff_until: Option<DateTime<Utc>>,
    pub handoff_requested_at: Option<DateTime<Utc>>,
}

impl HandoffState {
    /// A person has the conversation at `now`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.handoff_until.is_some_and(|until| until > now)
    }
}

#[allow(async_fn_in_trait)]
pub trait HandoffStore {
    /// The conversation's handoff state; `NotFound` when it is not the tenant's.
    async fn handoff_state(&self, tenant: TenantId, conversation: ConversationId) -> StoreResult<HandoffState>;
    /// A person takes the conversation until `until` (the request, if any, is answered).
    async fn take_over(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The bot answers again.
    async fn release_handoff(&self, tenant: TenantId, conversation: ConversationId) -> StoreResult<bool>;
    /// Pushes an active handoff's end to `until`; an ended one stays ended.
    async fn extend_handoff(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// The customer asked for a person: flags the request (its first time is kept) and hands
    /// the conversation over until `until`.
    async fn request_handoff(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool>;
}

impl HandoffStore for Store {
    async fn handoff_state(&self, tenant: TenantId, conversation: ConversationId) -> StoreResult<HandoffState> {
        let row: Option<HandoffState> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT handoff_until, handoff_requested_at FROM conversations WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .fetch_optional(pool)
            .await
        })?;
        row.ok_or_else(|| StoreError::NotFound(format!("conversation {conversation}")))
    }

    async fn take_over(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE conversations SET handoff_until = $1, handoff_requested_at = NULL
                 WHERE tenant_id = $2 AND id = $3",
            )
            .bind(until)
            .bind(tenant.0)
            .bind(conversation.0)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn release_handoff(&self, tenant: TenantId, conversation: ConversationId) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE conversations SET handoff_until = NULL, handoff_requested_at = NULL
                 WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn extend_handoff(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE conversations SET handoff_until = $1
                 WHERE tenant_id = $2 AND id = $3 AND handoff_until > $4 AND handoff_until < $1",
            )
            .bind(until)
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(now)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn request_handoff(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE conversations SET handoff_requested_at = COALESCE(handoff_requested_at, $1),
                     handoff_until = CASE WHEN handoff_until IS NULL OR handoff_until < $2 THEN $2
                                          ELSE handoff_until END
                 WHERE tenant_id = $3 AND id = $4",
            )
            .bind(now)
            .bind(until)
            .bind(tenant.0)
            .bind(conversation.0)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }
}
