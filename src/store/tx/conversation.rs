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
/// wrote. For a message's conversation, [`admit_in_tx`] decides first.
macro_rules! conversation_in_tx {
    ($tx:ident, $tenant:expr, $conversation:expr, $now:expr) => {
        async {
            let conversation: &$crate::store::ConversationRef = $conversation;
            match conversation {
                $crate::store::ConversationRef::Known(known) => Ok::<_, $crate::store::StoreError>(*known),
                $crate::store::ConversationRef::Upsert(upsert) => {
                    $crate::store::tx::upsert_contact_in_tx!($tx, $tenant, upsert, $now)
                }
            }
        }
        .await
    };
}
pub(crate) use conversation_in_tx;

/// Inside a write transaction `$tx`: upserts the contact `$upsert` (a `&ContactUpsert`) and its
/// conversation; the conversation's id.
macro_rules! upsert_contact_in_tx {
    ($tx:ident, $tenant:expr, $upsert:expr, $now:expr) => {
        async {
            let upsert: &$crate::store::ContactUpsert = $upsert;
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
pub(crate) use upsert_contact_in_tx;

/// The latest erasure of any of a sender's identities. Binds: $1 tenant, $2 to $4 three of the
/// sender's tombstone identities (one repeated when it has fewer).
pub(crate) const LATEST_ERASURE: &str =
    "SELECT erased_at FROM erasures WHERE tenant_id = $1 AND identity IN ($2, $3, $4)
     ORDER BY erased_at DESC LIMIT 1";

/// Whether a contact's conversation was erased, read with a share lock on the contact's row on
/// PostgreSQL. Binds: $1 tenant, $2 conversation.
pub(crate) const OWNER_ERASED: [&str; 2] = [
    "SELECT c.erased_at FROM conversations v JOIN contacts c ON c.tenant_id = v.tenant_id AND c.id = v.contact_id
     WHERE v.tenant_id = $1 AND v.id = $2",
    "SELECT c.erased_at FROM conversations v JOIN contacts c ON c.tenant_id = v.tenant_id AND c.id = v.contact_id
     WHERE v.tenant_id = $1 AND v.id = $2 FOR SHARE OF c",
];

/// The contact stored under a key and not erased, its row locked on PostgreSQL the way the
/// upsert that follows locks it (two intakes of one first contact queue instead of each holding
/// a share and waiting to upgrade it). Binds: $1 tenant, $2 key.
pub(crate) const KEY_LOCKED: [&str; 2] = [
    "SELECT id FROM contacts WHERE tenant_id = $1 AND external_key = $2 AND erased_at IS NULL",
    "SELECT id FROM contacts WHERE tenant_id = $1 AND external_key = $2 AND erased_at IS NULL FOR UPDATE",
];

/// Inside a write transaction `$tx` on `$pool`: the conversation message `$message` (a
/// `&NewInbound`, resolved by the read before as `$conversation`) is stored in, or `None` when
/// it is dropped because its sender was erased after it was sent.
///
/// An erasure and the intake meet on the contact's row. The intake reads the contact's
/// `erased_at` under a share lock (PostgreSQL; SQLite's one writer already orders them), which
/// an erasure's update of that row waits for, and which itself waits for an erasure in flight
/// and then reads what it committed. So a message lands either before an erasure, and is
/// erased with it, or after it:
/// - a known conversation whose contact is not erased: stored there;
/// - a known conversation whose contact was erased since the read before: dropped when sent at
///   or before the erasure (or with no send time), else stored as a new, empty contact's;
/// - a contact to upsert: its key's row is locked (for the upsert); a key with no live row (a
///   first contact, or one erased since the read before, whose key changed) is checked against
///   the tombstones here, in the transaction that would create it.
///
/// `$known`: the `erased_at` of the batch's known conversations, read for all of them at once
/// by `(tenant, conversation)` (`Some(&map)`), or `None` to read this one's here.
macro_rules! admit_in_tx {
    ($tx:ident, $pool:ident, $tenant:expr, $conversation:expr, $message:expr, $known:expr, $now:expr) => {
        async {
            use $crate::store::tx::conversation::{KEY_LOCKED, LATEST_ERASURE, OWNER_ERASED};
            let tenant: $crate::domain::TenantId = *$tenant;
            let message: &$crate::whatsapp::NewInbound = $message;
            let known: Option<&std::collections::HashMap<(i64, i64), Option<chrono::DateTime<chrono::Utc>>>> = $known;
            let sent_before = |at: chrono::DateTime<chrono::Utc>| message.sent_at.is_none_or(|sent| sent <= at);
            let fresh;
            let upsert: &$crate::store::ContactUpsert = match $conversation {
                $crate::store::ConversationRef::Known(id) => {
                    let erased_at: Option<chrono::DateTime<chrono::Utc>> =
                        match known.and_then(|k| k.get(&(tenant.0, id.0))) {
                            Some(state) => *state,
                            None => sqlx::query_scalar::<_, Option<chrono::DateTime<chrono::Utc>>>(
                                $pool.pick(OWNER_ERASED[0], OWNER_ERASED[1]),
                            )
                            .bind(tenant.0)
                            .bind(id.0)
                            .fetch_optional(&mut *$tx)
                            .await?
                            .flatten(),
                        };
                    match erased_at {
                        None => return Ok::<_, $crate::store::StoreError>(Some(*id)),
                        Some(at) if sent_before(at) => return Ok(None),
                        Some(_) => {
                            fresh = $crate::store::ContactUpsert::of(&message.contact);
                            &fresh
                        }
                    }
                }
                $crate::store::ConversationRef::Upsert(upsert) => &**upsert,
            };
            let stored: Option<i64> = sqlx::query_scalar($pool.pick(KEY_LOCKED[0], KEY_LOCKED[1]))
                .bind(tenant.0)
                .bind(&upsert.key)
                .fetch_optional(&mut *$tx)
                .await?;
            if stored.is_none()
                && let Some(first) = message.sender_hashes.first()
            {
                let [b, c] = [1, 2].map(|i| message.sender_hashes.get(i).unwrap_or(first));
                let erased: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(LATEST_ERASURE)
                    .bind(tenant.0)
                    .bind(first)
                    .bind(b)
                    .bind(c)
                    .fetch_optional(&mut *$tx)
                    .await?;
                if erased.is_some_and(sent_before) {
                    return Ok(None);
                }
            }
            Ok(Some($crate::store::tx::upsert_contact_in_tx!($tx, tenant, upsert, $now)?))
        }
        .await
    };
}
pub(crate) use admit_in_tx;
