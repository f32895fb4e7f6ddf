//! The model's conversation history, written once per turn.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::jobs::hold_job_lease;
use super::{Dialect, Store, StoreError, StoreResult, reading, writing};
use crate::domain::{ConversationId, JobId, TenantId};
use crate::jobs::Lease;
use crate::llm::ChatMessage;

/// One stored message of an earlier turn.
#[derive(Debug, Clone)]
pub struct StoredMessage {
    pub turn: JobId,
    pub provider: String,
    pub message: ChatMessage,
}

#[allow(async_fn_in_trait)]
pub trait HistoryStore {
    /// Whether this turn's messages were already written (its answer is then in the outbox).
    async fn turn_recorded(&self, tenant: TenantId, turn: JobId) -> StoreResult<bool>;
    /// Writes the turn's messages in order, only while `lease` (the turn's job lease) is held,
    /// so a stale worker cannot split a `tool_use` from its `tool_result`; a second write of
    /// the same turn changes nothing. Without a lease (importing history) nothing is checked.
    #[expect(clippy::too_many_arguments, reason = "one statement's parameters, each of a different kind")]
    async fn record_turn(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        turn: JobId,
        lease: Option<&Lease>,
        provider: &str,
        messages: &[ChatMessage],
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Messages of the conversation's turns before `before`, oldest first, at most the last
    /// `max_turns` turns.
    async fn history(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        before: JobId,
        max_turns: i64,
    ) -> StoreResult<Vec<StoredMessage>>;
}

impl HistoryStore for Store {
    async fn turn_recorded(&self, tenant: TenantId, turn: JobId) -> StoreResult<bool> {
        let n: i64 = reading!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM conversation_messages WHERE tenant_id = $1 AND turn_id = $2")
                .bind(tenant.0)
                .bind(turn.0)
                .fetch_one(pool)
                .await
        })?;
        Ok(n > 0)
    }

    async fn record_turn(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        turn: JobId,
        lease: Option<&Lease>,
        provider: &str,
        messages: &[ChatMessage],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            if let Some(lease) = lease
                && !hold_job_lease!(tx, lease, now)?
            {
                return Err(StoreError::LeaseLost);
            }
            for (seq, message) in messages.iter().enumerate() {
                let role = match message.role {
                    crate::llm::Role::User => "user",
                    crate::llm::Role::Assistant => "assistant",
                };
                sqlx::query(
                    "INSERT INTO conversation_messages
                         (tenant_id, conversation_id, turn_id, seq, role, provider, content, created_at, turn_attempt)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                     ON CONFLICT (tenant_id, turn_id, seq) DO NOTHING",
                )
                .bind(tenant.0)
                .bind(conversation.0)
                .bind(turn.0)
                .bind(seq as i64)
                .bind(role)
                .bind(provider)
                .bind(Json(message))
                .bind(now)
                .bind(lease.map(|l| l.attempt))
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    async fn history(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        before: JobId,
        max_turns: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        let rows: Vec<(i64, String, Json<ChatMessage>)> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT turn_id, provider, content FROM conversation_messages
                 WHERE tenant_id = $1 AND conversation_id = $2 AND turn_id < $3
                   AND turn_id IN (SELECT DISTINCT turn_id FROM conversation_messages
                                   WHERE tenant_id = $1 AND conversation_id = $2 AND turn_id < $3
                                   ORDER BY turn_id DESC LIMIT $4)
                 ORDER BY turn_id, seq",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(before.0)
            .bind(max_turns)
            .fetch_all(pool)
            .await
        })
        .map_err(StoreError::from)?;
        Ok(rows
            .into_iter()
            .map(|(turn, provider, content)| StoredMessage { turn: JobId(turn), provider, message: content.0 })
            .collect())
    }
}
