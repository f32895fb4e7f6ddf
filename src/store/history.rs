//! The model's conversation history, written once per turn, with the trace of the turn's
//! model calls (`model_calls`) in the same transaction: a turn's calls are recorded exactly
//! when its messages are, and a second write of the turn changes neither. A turn run by a
//! worker records both at its end, with its replies and the job's completion
//! (`JobStore::finish_turn`); [`HistoryStore::record_turn`] writes history on its own
//! (imports, tests).

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::tx::{hold_job_lease, insert_history};
use super::{Dialect, Lease, Store, StoreError, StoreResult, reading, writing};
use crate::domain::{ConversationId, JobId, TenantId};
use crate::llm::ChatMessage;

/// One stored message of an earlier turn.
#[derive(Debug, Clone)]
pub struct StoredMessage {
    pub turn: JobId,
    pub provider: String,
    pub message: ChatMessage,
}

/// One model call of a turn, as the console's trace shows it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ModelCall {
    pub turn_id: i64,
    /// 0-based, in the order the calls were made.
    pub seq: i64,
    pub provider: String,
    pub request_id: Option<String>,
    /// `end_turn`, `tool_use`, `max_tokens`, `refusal`, `other`, or `error`.
    pub stop_reason: String,
    pub latency_ms: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

#[allow(async_fn_in_trait)]
pub trait HistoryStore {
    /// Whether this turn's messages were already written (the turn then ended: its replies
    /// and its completion were written in the same transaction).
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
        let calls: &[ModelCall] = &[];
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            if let Some(lease) = lease
                && !hold_job_lease!(tx, lease, now)?
            {
                return Err(StoreError::LeaseLost);
            }
            insert_history!(tx, tenant, conversation, turn, lease.map(|l| l.attempt), provider, messages, calls, now)?;
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
