//! An inbound message inside a write transaction: its conversation (known or upserted), the
//! message row, and the turn job it feeds; shared by the one-message path and group commit.

/// Binds: $1 tenant, $2 conversation, $3 provider id, $4 kind, $5 body, $6 reply id,
/// $7 context id, $8 sent at, $9 now, $10 raw.
macro_rules! insert_inbound_sql {
    () => {
        "INSERT INTO inbound_messages
             (tenant_id, conversation_id, provider_message_id, kind, body, reply_id, context_id, sent_at, received_at, raw,
              simulated_by, media_id, error_code)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
         ON CONFLICT (tenant_id, provider_message_id) DO NOTHING
         RETURNING id"
    };
}
pub(crate) use insert_inbound_sql;

/// Binds `insert_inbound_sql!`'s thirteen parameters, in order, to `$query`.
macro_rules! bind_inbound {
    ($query:expr, $tenant:expr, $conversation:expr, $message:expr, $now:expr) => {
        $query
            .bind($tenant.0)
            .bind($conversation.0)
            .bind(&$message.provider_message_id)
            .bind($message.content.kind())
            .bind($message.content.body())
            .bind($message.content.reply_id())
            .bind($message.context_id.as_deref())
            .bind($message.sent_at)
            .bind($now)
            .bind(sqlx::types::Json(&$message.raw))
            .bind($message.simulated_by.as_deref())
            .bind($message.content.media_id())
            .bind($message.content.error_code())
    };
}
pub(crate) use bind_inbound;

/// Creates the conversation's pending turn, or pushes its start back but never past the
/// debounce deadline. `$rows` supplies (tenant, conversation, state, run_at, deadline,
/// attempts, max_attempts, created_at, updated_at); `$returning` the columns returned (`id`).
macro_rules! upsert_turn_sql {
    ($rows:literal) => {
        upsert_turn_sql!($rows, "id")
    };
    ($rows:literal, $returning:literal) => {
        concat!(
            "INSERT INTO jobs (tenant_id, conversation_id, state, run_at, debounce_deadline, attempts, max_attempts, created_at, updated_at) ",
            $rows,
            " ON CONFLICT (tenant_id, conversation_id) WHERE state = 'available' AND kind = 'turn' DO UPDATE SET
                 run_at = CASE WHEN excluded.run_at < jobs.debounce_deadline
                               THEN excluded.run_at ELSE jobs.debounce_deadline END,
                 updated_at = excluded.updated_at
             RETURNING ",
            $returning
        )
    };
}
pub(crate) use upsert_turn_sql;

/// Inside a write transaction `$tx`: stores `$message` unless its provider id is there and, if
/// stored, gives it its job (a turn upserted and pushed back, or a click's own job). Yields
/// `Some(job)`, or `None` for a duplicate (which wrote nothing). Shared by the one-message
/// transactions and the intake's group commit.
macro_rules! record_in_tx {
    ($tx:ident, $tenant:expr, $conversation:expr, $message:expr, $kind:expr, $timing:expr, $now:expr) => {
        async {
            let inserted: Option<i64> =
                bind_inbound!(sqlx::query_scalar(insert_inbound_sql!()), $tenant, $conversation, $message, $now)
                    .fetch_optional(&mut *$tx)
                    .await?;
            let Some(inserted) = inserted else {
                return Ok::<_, $crate::store::StoreError>(None);
            };
            let job: i64 = match $kind {
                $crate::store::JobKind::Turn => {
                    sqlx::query_scalar(upsert_turn_sql!("VALUES ($1, $2, 'available', $3, $4, 0, $5, $6, $6)"))
                        .bind($tenant.0)
                        .bind($conversation.0)
                        .bind($now + $timing.debounce)
                        .bind($now + $timing.debounce_max)
                        .bind(i64::from($timing.max_attempts))
                        .bind($now)
                        .fetch_one(&mut *$tx)
                        .await?
                }
                // A click gets a job of its own, with the message as its only one and its trigger.
                $crate::store::JobKind::Click => {
                    let job: i64 = sqlx::query_scalar(
                        "INSERT INTO jobs (tenant_id, conversation_id, kind, state, run_at, debounce_deadline, attempts,
                                           max_attempts, trigger_message_id, created_at, updated_at)
                         VALUES ($1, $2, 'click', 'available', $3, $3, 0, $4, $5, $3, $3)
                         RETURNING id",
                    )
                    .bind($tenant.0)
                    .bind($conversation.0)
                    .bind($now)
                    .bind(i64::from($timing.max_attempts))
                    .bind(&$message.provider_message_id)
                    .fetch_one(&mut *$tx)
                    .await?;
                    sqlx::query("UPDATE inbound_messages SET turn_id = $1 WHERE tenant_id = $2 AND id = $3")
                        .bind(job)
                        .bind($tenant.0)
                        .bind(inserted)
                        .execute(&mut *$tx)
                        .await?;
                    job
                }
            };
            Ok(Some($crate::domain::JobId(job)))
        }
        .await
    };
}
pub(crate) use record_in_tx;

/// Inside a write transaction `$tx`: the id of a [`ConversationRef`]'s conversation, upserting
/// its contact and conversation first when the read before found work to do. Idempotent: a
/// repeat (or a concurrent first message of the same contact) finds the rows its predecessor
/// wrote.
macro_rules! conversation_in_tx {
    ($tx:ident, $tenant:expr, $conversation:expr, $now:expr) => {
        async {
            let conversation: &$crate::store::ConversationRef = $conversation;
            let upsert = match conversation {
                $crate::store::ConversationRef::Known(known) => {
                    return Ok::<_, $crate::store::StoreError>(*known);
                }
                $crate::store::ConversationRef::Upsert(upsert) => upsert,
            };
            let contact_id: i64 = sqlx::query_scalar(
                "INSERT INTO contacts (tenant_id, external_key, wa_id, user_id, username, profile_name, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
                 ON CONFLICT (tenant_id, external_key) DO UPDATE SET
                     wa_id = COALESCE(excluded.wa_id, contacts.wa_id),
                     user_id = COALESCE(excluded.user_id, contacts.user_id),
                     username = COALESCE(excluded.username, contacts.username),
                     profile_name = COALESCE(excluded.profile_name, contacts.profile_name),
                     updated_at = excluded.updated_at
                 RETURNING id",
            )
            .bind($tenant.0)
            .bind(&upsert.key)
            .bind(upsert.wa_id.as_deref())
            .bind(upsert.user_id.as_deref())
            .bind(upsert.username.as_deref())
            .bind(upsert.profile_name.as_deref())
            .bind($now)
            .fetch_one(&mut *$tx)
            .await?;
            let conversation: i64 = sqlx::query_scalar(
                "INSERT INTO conversations (tenant_id, contact_id, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant_id, contact_id) DO UPDATE SET contact_id = excluded.contact_id
                 RETURNING id",
            )
            .bind($tenant.0)
            .bind(contact_id)
            .bind($now)
            .fetch_one(&mut *$tx)
            .await?;
            Ok::<_, $crate::store::StoreError>($crate::domain::ConversationId(conversation))
        }
        .await
    };
}
pub(crate) use conversation_in_tx;
