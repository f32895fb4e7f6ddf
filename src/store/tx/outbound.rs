//! Outbox writes inside a transaction: a message written with the fact it announces, the
//! handoff check that drops a bot reply, and a delivery status applied.

/// Inside a write transaction: inserts `$new` (a [`NewOutbound`]) unless its key exists;
/// yields the new row's id. Features that write a message together with the fact it announces
/// (a charge, an expired proposal) use it in their own transaction.
macro_rules! insert_outbound {
    ($tx:expr, $new:expr, $now:expr) => {
        sqlx::query_scalar(
            "INSERT INTO outbound_messages
                 (tenant_id, conversation_id, idempotency_key, to_wa_id, to_user_id, message, status,
                  attempts, next_attempt_at, created_at, updated_at, turn_attempt)
             VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $8, $8, $9)
             ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
             RETURNING id",
        )
        .bind($new.tenant.0)
        .bind($new.conversation.0)
        .bind($new.key.as_str())
        .bind($new.recipient.wa_id.as_ref().map(crate::domain::PhoneE164::digits))
        .bind($new.recipient.user_id.as_deref())
        .bind(sqlx::types::Json(&$new.message))
        .bind(if $new.local { "local" } else { "pending" })
        .bind($now)
        .bind($new.written_by.as_ref().map(|l: &crate::store::Lease| l.attempt))
        .fetch_optional(&mut *$tx)
        .await
    };
}
pub(crate) use insert_outbound;

/// Inside a write transaction: true when a person has `$new`'s conversation at `$now`, so a
/// reply marked `unless_handed_off` is dropped (checked where the reply is inserted, so a
/// takeover that commits first always wins).
macro_rules! handed_off {
    ($tx:expr, $new:expr, $now:expr) => {
        sqlx::query_scalar::<_, i64>(
            "SELECT id FROM conversations WHERE tenant_id = $1 AND id = $2 AND handoff_until > $3",
        )
        .bind($new.tenant.0)
        .bind($new.conversation.0)
        .bind($now)
        .fetch_optional(&mut *$tx)
        .await
        .map(|row| row.is_some())
    };
}
pub(crate) use handed_off;

/// Applies a status webhook on `$executor` (a pool or a transaction); yields the rows changed.
/// Matched by wamid or by our key (one indexed lookup each, tenant-scoped: with `OR` SQLite
/// scanned the tenant's outbox), forward-only: a late `delivered` never undoes `read`.
macro_rules! apply_status_on {
    ($executor:expr, $tenant:expr, $update:expr, $now:expr) => {
        async {
            sqlx::query(
                "UPDATE outbound_messages SET
                 status = $1, provider_message_id = COALESCE(provider_message_id, $2),
                 last_error = COALESCE($3, last_error), sent_at = COALESCE(sent_at, $4), updated_at = $4
             WHERE id IN (SELECT id FROM outbound_messages WHERE tenant_id = $5 AND provider_message_id = $2
                          UNION SELECT id FROM outbound_messages WHERE tenant_id = $5 AND idempotency_key = $6)
               AND status <> 'local'
               AND (CASE status WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'read' THEN 3
                                WHEN 'failed' THEN 4 ELSE 0 END) < $7",
            )
            .bind($update.status.as_str())
            .bind(&$update.provider_message_id)
            .bind($update.error.as_deref())
            .bind($now)
            .bind($tenant.0)
            .bind($update.callback_key.as_deref())
            .bind($update.status.rank())
            .execute($executor)
            .await
            .map(|r| r.rows_affected())
        }
    };
}
pub(crate) use apply_status_on;
