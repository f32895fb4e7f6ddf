//! What the console's conversation pages read: the tenant's conversations by recency, one
//! conversation's transcript (the last messages only) and its per-turn trace.
//!
//! Invariants: every query names its tenant; lists are bounded (`LIMIT`) and walk indexes by
//! conversation and id (`inbound_messages_conversation`, `outbound_messages_conversation`,
//! `jobs_conversation`, `model_calls_conversation`, `agent_tool_executions_conversation`), so
//! a page costs the same with a hundred thousand messages stored as with ten.

use chrono::{DateTime, Utc};

use crate::domain::{ConversationId, TenantId};
use crate::ledger::ExecutionRecord;
use crate::store::ledger::execution_columns;
use crate::store::{Dialect, ModelCall, OutboundRecord, Store, StoreResult, reading};

/// A conversation as the list and the page header show it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ConversationSummary {
    pub id: i64,
    pub contact_id: i64,
    pub profile_name: Option<String>,
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
    pub handoff_until: Option<DateTime<Utc>>,
    pub handoff_requested_at: Option<DateTime<Utc>>,
    pub opted_out_at: Option<DateTime<Utc>>,
    pub last_activity: DateTime<Utc>,
}

/// One inbound message as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboundRow {
    pub id: i64,
    pub provider_message_id: String,
    pub kind: String,
    pub body: Option<String>,
    pub reply_id: Option<String>,
    pub received_at: DateTime<Utc>,
    pub turn_id: Option<i64>,
    /// A voice note's text, or why it could not be heard.
    pub transcript: Option<String>,
    pub transcript_error: Option<String>,
    /// Meta's error code on an unsupported or error-only message.
    pub error_code: Option<i64>,
}

/// One job of the conversation.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TurnRow {
    pub id: i64,
    pub kind: String,
    pub state: String,
    pub attempts: i64,
    pub max_attempts: i64,
    pub last_error: Option<String>,
    pub trigger_message_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A pending action of the conversation.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActionRow {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub offer_text: String,
    pub proposed_by: Option<String>,
    pub offer_key: Option<String>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A charge to (or asked by) the conversation's contact.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ChargeRow {
    pub id: i64,
    pub action_id: Option<String>,
    pub idempotency_key: String,
    pub status: String,
    pub amount_cents: i64,
    pub description: String,
    pub delivery: String,
    pub created_at: DateTime<Utc>,
}

/// Changes whenever the conversation's page would: new rows, status changes, handoff.
#[derive(Debug, Clone, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct ConversationVersion {
    pub inbound: Option<i64>,
    pub outbound: Option<i64>,
    pub outbound_updated: Option<DateTime<Utc>>,
    pub job: Option<i64>,
    pub job_updated: Option<DateTime<Utc>>,
    pub handoff_until: Option<DateTime<Utc>>,
    pub handoff_requested_at: Option<DateTime<Utc>>,
}

/// The last activity of a conversation: its newest inbound or outbound row, else its creation.
/// `$latest` is the dialect's "greatest of" (`MAX(a, b)` on SQLite, `GREATEST` on PostgreSQL);
/// the inner query ends with `$fence` (PostgreSQL's `OFFSET 0`) so each correlated subquery runs
/// once per conversation instead of once per mention.
macro_rules! summary_sql {
    ($latest:literal, $fence:literal, $filter:literal, $tail:literal) => {
        concat!(
            "SELECT id, contact_id, profile_name, wa_id, user_id, handoff_until, handoff_requested_at, opted_out_at, ",
            $latest,
            " AS last_activity
             FROM (
                 SELECT c.id, c.contact_id, c.created_at, c.handoff_until, c.handoff_requested_at,
                        k.profile_name, k.wa_id, k.user_id, k.opted_out_at,
                        (SELECT i.received_at FROM inbound_messages i
                          WHERE i.tenant_id = c.tenant_id AND i.conversation_id = c.id
                          ORDER BY i.id DESC LIMIT 1) AS last_in,
                        (SELECT o.created_at FROM outbound_messages o
                          WHERE o.conversation_id = c.id AND o.tenant_id = c.tenant_id
                          ORDER BY o.id DESC LIMIT 1) AS last_out
                 FROM conversations c JOIN contacts k ON k.id = c.contact_id AND k.tenant_id = c.tenant_id
                 WHERE c.tenant_id = $1 ",
            $filter,
            $fence,
            ") AS v ",
            $tail
        )
    };
    ($filter:literal, $tail:literal) => {
        (
            summary_sql!("MAX(COALESCE(last_in, created_at), COALESCE(last_out, created_at))", "", $filter, $tail),
            summary_sql!("GREATEST(last_in, last_out, created_at)", " OFFSET 0", $filter, $tail),
        )
    };
}

#[allow(async_fn_in_trait)]
pub trait ConversationViewStore {
    /// The tenant's conversations, most recent activity first.
    async fn conversations_page(
        &self,
        tenant: TenantId,
        limit: i64,
        offset: i64,
    ) -> StoreResult<Vec<ConversationSummary>>;
    /// One conversation of the tenant, if it is one.
    async fn conversation_summary(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Option<ConversationSummary>>;
    /// The last `limit` inbound messages with an id below `before` (all when `None`), oldest first.
    async fn inbound_page(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<InboundRow>>;
    /// The last `limit` outbound messages with an id below `before`, oldest first.
    async fn outbound_page(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<OutboundRecord>>;
    /// The conversation's last `limit` jobs, newest first.
    async fn recent_turns(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        limit: i64,
    ) -> StoreResult<Vec<TurnRow>>;
    /// Model calls of the conversation's turns from `first_turn` on.
    async fn model_calls_from(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        first_turn: i64,
    ) -> StoreResult<Vec<ModelCall>>;
    /// Ledger rows of the conversation reserved by turns from `first_turn` on, oldest first.
    async fn executions_from(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        first_turn: i64,
    ) -> StoreResult<Vec<ExecutionRecord>>;
    /// The conversation's last `limit` pending actions, oldest first.
    async fn recent_actions(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        limit: i64,
    ) -> StoreResult<Vec<ActionRow>>;
    /// The last `limit` charges to or asked from the conversation, oldest first.
    async fn recent_charges(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        limit: i64,
    ) -> StoreResult<Vec<ChargeRow>>;
    /// A cheap fingerprint of the conversation's state, for live updates.
    async fn conversation_version(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<ConversationVersion>;
}

impl ConversationViewStore for Store {
    async fn conversations_page(
        &self,
        tenant: TenantId,
        limit: i64,
        offset: i64,
    ) -> StoreResult<Vec<ConversationSummary>> {
        Ok(reading!(self, pool => {
            let (sqlite, postgres) = summary_sql!("", "ORDER BY last_activity DESC, id DESC LIMIT $2 OFFSET $3");
            sqlx::query_as(pool.pick(sqlite, postgres))
                .bind(tenant.0)
                .bind(limit)
                .bind(offset)
                .fetch_all(pool)
                .await
        })?)
    }

    async fn conversation_summary(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<Option<ConversationSummary>> {
        Ok(reading!(self, pool => {
            let (sqlite, postgres) = summary_sql!("AND c.id = $2", "");
            sqlx::query_as(pool.pick(sqlite, postgres))
                .bind(tenant.0)
                .bind(conversation.0)
                .fetch_optional(pool)
                .await
        })?)
    }

    async fn inbound_page(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<InboundRow>> {
        let mut rows: Vec<InboundRow> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, provider_message_id, kind, body, reply_id, received_at, turn_id, transcript, transcript_error,
                        error_code
                 FROM inbound_messages
                 WHERE tenant_id = $1 AND conversation_id = $2 AND id < $3
                 ORDER BY id DESC LIMIT $4",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        rows.reverse();
        Ok(rows)
    }

    async fn outbound_page(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<OutboundRecord>> {
        let mut rows: Vec<OutboundRecord> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, conversation_id, idempotency_key, status, message, provider_message_id, attempts,
                        last_error, created_at
                 FROM outbound_messages
                 WHERE conversation_id = $2 AND tenant_id = $1 AND id < $3
                 ORDER BY id DESC LIMIT $4",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        rows.reverse();
        Ok(rows)
    }

    async fn recent_turns(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        limit: i64,
    ) -> StoreResult<Vec<TurnRow>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, kind, state, attempts, max_attempts, last_error, trigger_message_id, created_at FROM jobs
                 WHERE conversation_id = $2 AND tenant_id = $1
                 ORDER BY id DESC LIMIT $3",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn model_calls_from(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        first_turn: i64,
    ) -> StoreResult<Vec<ModelCall>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT turn_id, CAST(seq AS BIGINT) AS seq, provider, request_id, stop_reason, latency_ms,
                        input_tokens, output_tokens
                 FROM model_calls
                 WHERE tenant_id = $1 AND conversation_id = $2 AND turn_id >= $3
                 ORDER BY turn_id, seq",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(first_turn)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn executions_from(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        first_turn: i64,
    ) -> StoreResult<Vec<ExecutionRecord>> {
        let _gate = self.replays.read_gate().await;
        let mut rows: Vec<ExecutionRecord> = reading!(self, pool => {
            sqlx::query_as(concat!(
                "SELECT ",
                execution_columns!(),
                " FROM agent_tool_executions
                 WHERE tenant_id = $1 AND conversation_id = $2 AND turn_id >= $3
                 ORDER BY id"
            ))
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(first_turn)
            .fetch_all(pool)
            .await
        })?;
        self.replays.add_pending(tenant, rows.iter_mut().map(|r| (r.id, &mut r.replay_count)));
        Ok(rows)
    }

    async fn recent_actions(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        limit: i64,
    ) -> StoreResult<Vec<ActionRow>> {
        let mut rows: Vec<ActionRow> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, kind, status, offer_text, proposed_by, offer_key, error, created_at FROM pending_actions
                 WHERE tenant_id = $1 AND conversation_id = $2
                 ORDER BY created_at DESC LIMIT $3",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        rows.reverse();
        Ok(rows)
    }

    async fn recent_charges(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        limit: i64,
    ) -> StoreResult<Vec<ChargeRow>> {
        let mut rows: Vec<ChargeRow> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, action_id, idempotency_key, status, amount_cents, description, delivery, created_at
                 FROM charges
                 WHERE tenant_id = $1 AND (customer_conversation_id = $2 OR merchant_conversation_id = $2)
                 ORDER BY id DESC LIMIT $3",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(limit)
            .fetch_all(pool)
            .await
        })?;
        rows.reverse();
        Ok(rows)
    }

    async fn conversation_version(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<ConversationVersion> {
        // Status changes touch recent rows: the newest few of each kind are enough to see them.
        let version: Option<ConversationVersion> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT
                     (SELECT MAX(id) FROM inbound_messages WHERE tenant_id = $1 AND conversation_id = $2) AS inbound,
                     (SELECT MAX(id) FROM outbound_messages WHERE conversation_id = $2 AND tenant_id = $1) AS outbound,
                     (SELECT MAX(updated_at) FROM (SELECT updated_at FROM outbound_messages
                         WHERE conversation_id = $2 AND tenant_id = $1 ORDER BY id DESC LIMIT 20) AS o)
                         AS outbound_updated,
                     (SELECT MAX(id) FROM jobs WHERE conversation_id = $2 AND tenant_id = $1) AS job,
                     (SELECT MAX(updated_at) FROM (SELECT updated_at FROM jobs
                         WHERE conversation_id = $2 AND tenant_id = $1 ORDER BY id DESC LIMIT 5) AS j) AS job_updated,
                     c.handoff_until, c.handoff_requested_at
                 FROM conversations c WHERE c.tenant_id = $1 AND c.id = $2",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .fetch_optional(pool)
            .await
        })?;
        Ok(version.unwrap_or_default())
    }
}
