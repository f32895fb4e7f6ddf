//! A turn's model history, written inside the turn's end.

/// Inside a write transaction: inserts a turn's messages (in order, `seq` from 0) and its
/// model calls, each unless already there, so a second write of the turn changes nothing.
/// Shared by [`HistoryStore::record_turn`] and the turn's end (`JobStore::finish_turn`).
macro_rules! insert_history {
    ($tx:expr, $tenant:expr, $conversation:expr, $turn:expr, $attempt:expr, $provider:expr, $messages:expr,
     $calls:expr, $now:expr) => {
        async {
            for (seq, message) in $messages.iter().enumerate() {
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
                .bind($tenant.0)
                .bind($conversation.0)
                .bind($turn.0)
                .bind(seq as i64)
                .bind(role)
                .bind($provider)
                .bind(sqlx::types::Json(message))
                .bind($now)
                .bind($attempt)
                .execute(&mut *$tx)
                .await?;
            }
            for call in $calls {
                sqlx::query(
                    "INSERT INTO model_calls
                         (tenant_id, conversation_id, turn_id, seq, provider, request_id, stop_reason, latency_ms,
                          input_tokens, output_tokens, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                     ON CONFLICT (tenant_id, turn_id, seq) DO NOTHING",
                )
                .bind($tenant.0)
                .bind($conversation.0)
                .bind($turn.0)
                .bind(call.seq as i32)
                .bind(&call.provider)
                .bind(call.request_id.as_deref())
                .bind(&call.stop_reason)
                .bind(call.latency_ms)
                .bind(call.input_tokens)
                .bind(call.output_tokens)
                .bind($now)
                .execute(&mut *$tx)
                .await?;
            }
            Ok::<(), sqlx::Error>(())
        }
        .await
    };
}
pub(crate) use insert_history;
