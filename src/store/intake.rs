//! The intake's writes, alone or in a group commit (see `crate::inbound::group_commit`).
//!
//! A batch is one write transaction. It changes when a commit happens, never what is written:
//! dedup stays the unique provider id, and a message's turn upsert stays in the transaction
//! that stores it. On PostgreSQL the batch's customer messages are one statement (arrays
//! unnested into the insert, then one turn upsert per conversation), which costs the database
//! a fraction of a statement per message; clicks and statuses, rarer, run one by one in the same
//! transaction. SQLite runs in-process, where a statement costs microseconds, so every write is
//! the statement it is alone (`record_in_tx!`, `apply_status_on!`). A message from a first
//! contact creates its contact and conversation in the same transaction
//! (`admit_in_tx!`): one commit for a new customer's first message, as for any.
//!
//! Every message is admitted in its write's transaction against erasures (`admit_in_tx!`):
//! the batch first reads its known conversations' contacts under a share lock (one statement
//! on PostgreSQL), so an erasure either committed before the batch read them, and its
//! redeliveries are dropped, or waits for the batch to commit and then erases what it stored.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::tx::{admit_in_tx, apply_status_on, bind_inbound, insert_inbound_sql, record_in_tx, upsert_turn_sql};
use super::{
    ConversationRef, Dialect, IntakeWrite, JobKind, OutboxStore, Pool, Recorded, Store, StoreResult, TurnTiming,
    Written,
};
use crate::domain::{ConversationId, JobId};

#[allow(async_fn_in_trait)]
pub trait IntakeStore {
    /// One write in a transaction of its own: the path without group commit.
    async fn write_intake(&self, write: &IntakeWrite, timing: &TurnTiming, now: DateTime<Utc>) -> StoreResult<Written>;
    /// Every write in one transaction, results in the order given. An error means nothing of
    /// the batch was written (the transaction rolled back).
    async fn write_intake_batch(
        &self,
        writes: &[&IntakeWrite],
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Written>>;
}

/// The erasure state of known conversations' contacts, by (tenant, conversation).
type KnownOwners = HashMap<(i64, i64), Option<DateTime<Utc>>>;

/// Every known conversation's contact in `$writes`, share-locked in one statement in
/// (tenant, contact) order, and whether each is erased (see `admit_in_tx!`). PostgreSQL only:
/// on SQLite the one writer orders erasures and batches already.
const KNOWN_OWNERS: &str = "SELECT k.tenant_id, k.conversation_id, c.erased_at
     FROM unnest($1::bigint[], $2::bigint[]) AS k(tenant_id, conversation_id)
     JOIN conversations v ON v.tenant_id = k.tenant_id AND v.id = k.conversation_id
     JOIN contacts c ON c.tenant_id = v.tenant_id AND c.id = v.contact_id
     ORDER BY c.tenant_id, c.id
     FOR SHARE OF c";

/// Inside a write transaction on `$pool`: one write, as it runs alone (`$known`: the batch's
/// known owners, if read).
macro_rules! write_one {
    ($tx:ident, $pool:ident, $write:expr, $timing:expr, $now:expr, $known:expr) => {
        async {
            Ok::<_, $crate::store::StoreError>(match $write {
                IntakeWrite::Message { tenant, conversation, message, kind } => {
                    match admit_in_tx!($tx, $pool, tenant, conversation, message, $known, $now)? {
                        None => Written::Message(Recorded::Erased),
                        Some(conversation) => {
                            let job = record_in_tx!($tx, tenant, conversation, message, *kind, $timing, $now)?;
                            Written::Message(match job {
                                Some(job) => Recorded::New { conversation, job },
                                None => Recorded::Duplicate,
                            })
                        }
                    }
                }
                IntakeWrite::Status { tenant, update } => {
                    Written::Status(apply_status_on!(&mut *$tx, tenant, update, $now).await? > 0)
                }
            })
        }
        .await
    };
}

/// Binds: $1 tenants, $2 conversations, $3 provider ids, $4 kinds, $5 bodies, $6 reply ids,
/// $7 context ids, $8 sent at, $9 raw (JSON text), $10 now, $11 run at, $12 debounce deadline,
/// $13 max attempts, $14 who typed each in the simulator, $15 media ids, $16 error codes. Returns (provider id, tenant, conversation, job) for each message stored;
/// a repeat (of a stored message or of an earlier row of the same batch) returns nothing.
const INSERT_TURN_MESSAGES: &str = concat!(
    "WITH input AS (
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[],
                              $7::text[], $8::timestamptz[], $9::text[], $14::text[], $15::text[], $16::bigint[])
             WITH ORDINALITY AS t(tenant_id, conversation_id, provider_message_id, kind, body, reply_id,
                                  context_id, sent_at, raw, simulated_by, media_id, error_code, ord)
     ),
     inserted AS (
         INSERT INTO inbound_messages
             (tenant_id, conversation_id, provider_message_id, kind, body, reply_id, context_id, sent_at,
              received_at, raw, simulated_by, media_id, error_code)
         SELECT tenant_id, conversation_id, provider_message_id, kind, body, reply_id, context_id, sent_at,
                $10, raw::jsonb, simulated_by, media_id, error_code
         FROM input ORDER BY ord
         ON CONFLICT (tenant_id, provider_message_id) DO NOTHING
         RETURNING tenant_id, conversation_id, provider_message_id
     ),
     turns AS (",
    upsert_turn_sql!(
        "SELECT DISTINCT tenant_id, conversation_id, 'available', $11::timestamptz, $12::timestamptz, 0::bigint,
                $13::bigint, $10::timestamptz, $10::timestamptz FROM inserted ORDER BY tenant_id, conversation_id",
        "tenant_id, conversation_id, id"
    ),
    ")
     SELECT i.provider_message_id, i.tenant_id, i.conversation_id, t.id
     FROM inserted i JOIN turns t ON t.tenant_id = i.tenant_id AND t.conversation_id = i.conversation_id"
);

/// The columns of [`INSERT_TURN_MESSAGES`]'s arrays, one entry per message.
#[derive(Default)]
struct Columns {
    tenants: Vec<i64>,
    conversations: Vec<i64>,
    ids: Vec<String>,
    kinds: Vec<String>,
    bodies: Vec<Option<String>>,
    reply_ids: Vec<Option<String>>,
    context_ids: Vec<Option<String>>,
    sent_at: Vec<Option<DateTime<Utc>>>,
    raw: Vec<String>,
    simulated_by: Vec<Option<String>>,
    media_ids: Vec<Option<String>>,
    error_codes: Vec<Option<i64>>,
}

impl IntakeStore for Store {
    async fn write_intake(&self, write: &IntakeWrite, timing: &TurnTiming, now: DateTime<Utc>) -> StoreResult<Written> {
        if let IntakeWrite::Status { tenant, update } = write {
            return Ok(Written::Status(self.apply_status(*tenant, update, now).await?));
        }
        // A message is admitted in its own transaction, as in a batch (see `admit_in_tx!`).
        let mut written = self.write_intake_batch(&[write], timing, now).await?;
        written.pop().ok_or_else(|| super::StoreError::Corrupt("a batch of one wrote nothing".into()))
    }

    async fn write_intake_batch(
        &self,
        writes: &[&IntakeWrite],
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Written>> {
        match &self.pool {
            Pool::Sqlite { write: pool, .. } => {
                let mut tx = pool.begin_write().await?;
                let mut written = Vec::with_capacity(writes.len());
                for write in writes {
                    written.push(write_one!(tx, pool, *write, timing, now, None)?);
                }
                tx.commit().await?;
                Ok(written)
            }
            Pool::Postgres(pool) => {
                let is_turn = |w: &IntakeWrite| matches!(w, IntakeWrite::Message { kind: JobKind::Turn, .. });
                let mut tx = pool.begin_write().await?;
                let (tenants, conversations): (Vec<i64>, Vec<i64>) = writes
                    .iter()
                    .filter_map(|w| match w {
                        IntakeWrite::Message { tenant, conversation: ConversationRef::Known(id), .. } => {
                            Some((tenant.0, id.0))
                        }
                        _ => None,
                    })
                    .unzip();
                let mut known = KnownOwners::new();
                if !conversations.is_empty() {
                    let rows: Vec<(i64, i64, Option<DateTime<Utc>>)> =
                        sqlx::query_as(KNOWN_OWNERS).bind(tenants).bind(conversations).fetch_all(&mut *tx).await?;
                    known = rows.into_iter().map(|(t, v, erased)| ((t, v), erased)).collect();
                }
                let mut columns = Columns::default();
                // Turn messages an erasure dropped, by (tenant, provider id).
                let mut dropped: Vec<(i64, &str)> = Vec::new();
                for write in writes {
                    if let IntakeWrite::Message { tenant, conversation, message, kind: JobKind::Turn } = write {
                        // First contacts (rare once a business runs) are upserted one by one,
                        // in the batch's transaction and its lock order.
                        let Some(conversation) =
                            admit_in_tx!(tx, pool, tenant, conversation, message, Some(&known), now)?
                        else {
                            dropped.push((tenant.0, &message.provider_message_id));
                            continue;
                        };
                        columns.tenants.push(tenant.0);
                        columns.conversations.push(conversation.0);
                        columns.ids.push(message.provider_message_id.clone());
                        columns.kinds.push(message.content.kind().to_owned());
                        columns.bodies.push(message.content.body().map(str::to_owned));
                        columns.reply_ids.push(message.content.reply_id().map(str::to_owned));
                        columns.context_ids.push(message.context_id.clone());
                        columns.sent_at.push(message.sent_at);
                        columns.raw.push(message.raw.to_string());
                        columns.simulated_by.push(message.simulated_by.clone());
                        columns.media_ids.push(message.content.media_id().map(str::to_owned));
                        columns.error_codes.push(message.content.error_code());
                    }
                }
                // (tenant, provider id) → (conversation, job) for each message the statement stored.
                let mut stored: HashMap<(i64, String), (i64, i64)> = HashMap::new();
                if !columns.ids.is_empty() {
                    let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(INSERT_TURN_MESSAGES)
                        .bind(columns.tenants)
                        .bind(columns.conversations)
                        .bind(columns.ids)
                        .bind(columns.kinds)
                        .bind(columns.bodies)
                        .bind(columns.reply_ids)
                        .bind(columns.context_ids)
                        .bind(columns.sent_at)
                        .bind(columns.raw)
                        .bind(now)
                        .bind(now + timing.debounce)
                        .bind(now + timing.debounce_max)
                        .bind(i64::from(timing.max_attempts))
                        .bind(columns.simulated_by)
                        .bind(columns.media_ids)
                        .bind(columns.error_codes)
                        .fetch_all(&mut *tx)
                        .await?;
                    stored = rows.into_iter().map(|(id, tenant, c, job)| ((tenant, id), (c, job))).collect();
                }
                let mut written = Vec::with_capacity(writes.len());
                for write in writes {
                    written.push(match write {
                        IntakeWrite::Message { tenant, message, .. } if is_turn(write) => {
                            // The first of a batch's repeats took the row; the others are duplicates.
                            match stored.remove(&(tenant.0, message.provider_message_id.clone())) {
                                Some((conversation, job)) => Written::Message(Recorded::New {
                                    conversation: ConversationId(conversation),
                                    job: JobId(job),
                                }),
                                None if dropped.contains(&(tenant.0, message.provider_message_id.as_str())) => {
                                    Written::Message(Recorded::Erased)
                                }
                                None => Written::Message(Recorded::Duplicate),
                            }
                        }
                        _ => write_one!(tx, pool, *write, timing, now, Some(&known))?,
                    });
                }
                tx.commit().await?;
                Ok(written)
            }
        }
    }
}
