//! What some kinds of inbound message do to stored rows (see `crate::turns::kinds`): a deletion
//! removes its message's text, an edit replaces it, a number change moves the contact, and a
//! voice note's transcript is kept once.
//!
//! Invariants: every statement names its tenant and the conversation the message came in, so a
//! message can only touch its own conversation's rows; each is idempotent, so a retried turn
//! changes nothing more; what writes a customer's words back (an edit, a transcript, a number)
//! is made only while the turn's lease is held, so a turn an erasure stopped cannot.

use serde_json::json;
use sqlx::types::Json;

use super::{Dialect, Lease, Store, StoreResult, changed_one, reading, writing};
use crate::domain::{ContactId, ConversationId, PhoneE164, TenantId};

/// A condition, for a statement with the lease's three values bound at `$L`, `$L+1`, `$L+2`:
/// the turn still holds its lease (see `hold_job_lease!`).
macro_rules! lease_held {
    ($job:literal, $worker:literal, $attempt:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM jobs j WHERE j.id = ",
            $job,
            " AND j.state = 'running' AND j.locked_by = ",
            $worker,
            " AND j.attempts = ",
            $attempt,
            ")"
        )
    };
}

/// What became of a number change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberMoved {
    Moved,
    /// Another contact already has the new number (`None`: one created meanwhile); both stay
    /// as they are.
    Taken(Option<ContactId>),
    /// The contact already had it (a redelivered notice).
    Unchanged,
}

#[allow(async_fn_in_trait)]
pub trait MessageEffectStore {
    /// Removes the text of message `target` (a hashed provider id) of `conversation` (body,
    /// transcript, raw element) and of the edits made to it; a voice note is never heard after.
    /// Where the model's history of its turn quoted it, `placeholder` stands instead. Whether
    /// it was found.
    async fn revoke_message(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        target: &str,
        placeholder: &str,
    ) -> StoreResult<bool>;
    /// Replaces the text of text message `target` (body and raw element) when it belongs to the
    /// turn holding `lease` (its turn has not answered it yet). Whether it did.
    async fn edit_message(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        target: &str,
        lease: &Lease,
        body: &str,
    ) -> StoreResult<bool>;
    /// Gives contact `contact` the number `number` (its key becomes the number's match key):
    /// the same contact, conversation, bookings and history, reached at the new number.
    async fn move_contact_number(
        &self,
        tenant: TenantId,
        contact: ContactId,
        number: &PhoneE164,
        lease: &Lease,
    ) -> StoreResult<NumberMoved>;
    /// Keeps a voice note's transcript or why it failed, unless one is already kept; returns
    /// what is kept (the first writer's), as (transcript, error), or `None` when the turn no
    /// longer holds `lease`.
    async fn keep_transcript(
        &self,
        tenant: TenantId,
        message: i64,
        lease: &Lease,
        result: Result<&str, &str>,
    ) -> StoreResult<Option<(Option<String>, Option<String>)>>;
}

impl MessageEffectStore for Store {
    async fn revoke_message(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        target: &str,
        placeholder: &str,
    ) -> StoreResult<bool> {
        // The history first: a retry after a crash between the two still finds the text.
        self.unquote_in_history(tenant, conversation, target, placeholder).await?;
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE inbound_messages SET body = NULL, transcript = NULL, raw = $1,
                     transcript_error = CASE WHEN kind = 'audio' THEN 'revoked' ELSE transcript_error END
                 WHERE tenant_id = $2 AND conversation_id = $3
                   AND (provider_message_id = $4 OR (kind = 'edit' AND context_id = $4))",
            )
            .bind(Json(json!({ "revoked": true })))
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(target)
            .execute(pool)
            .await
            .map(|done| done.rows_affected() > 0)
        })?)
    }

    async fn edit_message(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        target: &str,
        lease: &Lease,
        body: &str,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            // The raw element's text goes too: the old words are not kept anywhere. A body an
            // erasure removed meanwhile stays removed (the row is re-read once its lock is had).
            let set_raw = pool.pick("json_set(raw, '$.text.body', $1)", "jsonb_set(raw, '{text,body}', to_jsonb($1::text))");
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE inbound_messages SET body = $1, raw = {set_raw}
                 WHERE tenant_id = $2 AND conversation_id = $3 AND provider_message_id = $4 AND turn_id = $5
                   AND kind = 'text' AND body IS NOT NULL AND {}",
                lease_held!("$5", "$6", "$7")
            )))
            .bind(body)
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(target)
            .bind(lease.job.0)
            .bind(&lease.worker)
            .bind(lease.attempt)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn move_contact_number(
        &self,
        tenant: TenantId,
        contact: ContactId,
        number: &PhoneE164,
        lease: &Lease,
    ) -> StoreResult<NumberMoved> {
        let key = number.match_key();
        // `wa_id` is stored as WhatsApp reports it: digits, no `+`.
        let holder: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT id FROM contacts WHERE tenant_id = $1 AND (external_key = $2 OR wa_id = $3) ORDER BY id LIMIT 1")
                .bind(tenant.0)
                .bind(&key)
                .bind(number.digits())
                .fetch_optional(pool)
                .await
        })?;
        match holder {
            Some(id) if id == contact.0 => return Ok(NumberMoved::Unchanged),
            Some(id) => return Ok(NumberMoved::Taken(Some(ContactId(id)))),
            None => {}
        }
        // The unique key refuses a contact created with the new number meanwhile. An erasure that
        // committed while this waited for the row is seen on the row itself (`erased_at`): the
        // lease's subquery reads the statement's snapshot, where the turn still ran.
        let moved = writing!(self, pool => {
            sqlx::query(concat!(
                "UPDATE contacts SET external_key = $1, wa_id = $2
                 WHERE tenant_id = $3 AND id = $4 AND erased_at IS NULL
                   AND NOT EXISTS (SELECT 1 FROM contacts o WHERE o.tenant_id = $3 AND o.id <> $4 AND o.wa_id = $2)
                   AND ",
                lease_held!("$5", "$6", "$7")
            ))
            .bind(&key)
            .bind(number.digits())
            .bind(tenant.0)
            .bind(contact.0)
            .bind(lease.job.0)
            .bind(&lease.worker)
            .bind(lease.attempt)
            .execute(pool)
            .await
            .map(changed_one)
        });
        match moved {
            Ok(true) => Ok(NumberMoved::Moved),
            Ok(false) => Ok(NumberMoved::Unchanged),
            // A contact created with the new number meanwhile holds the unique key.
            Err(e) if is_unique_violation(&e) => Ok(NumberMoved::Taken(None)),
            Err(e) => Err(e.into()),
        }
    }

    async fn keep_transcript(
        &self,
        tenant: TenantId,
        message: i64,
        lease: &Lease,
        result: Result<&str, &str>,
    ) -> StoreResult<Option<(Option<String>, Option<String>)>> {
        let (text, error) = match result {
            Ok(text) => (Some(text), None),
            Err(error) => (None, Some(error)),
        };
        Ok(writing!(self, pool => {
            sqlx::query_as(concat!(
                "UPDATE inbound_messages
                 SET transcript = CASE WHEN transcript IS NULL AND transcript_error IS NULL THEN $1 ELSE transcript END,
                     transcript_error = CASE WHEN transcript IS NULL AND transcript_error IS NULL THEN $2
                                             ELSE transcript_error END
                 WHERE tenant_id = $3 AND id = $4 AND ",
                lease_held!("$5", "$6", "$7"),
                " RETURNING transcript, transcript_error"
            ))
            .bind(text)
            .bind(error)
            .bind(tenant.0)
            .bind(message)
            .bind(lease.job.0)
            .bind(&lease.worker)
            .bind(lease.attempt)
            .fetch_optional(pool)
            .await
        })?)
    }
}

impl Store {
    /// Replaces the words of message `target` (and its edits) with `placeholder` in the model's
    /// history of the turn that answered it.
    async fn unquote_in_history(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        target: &str,
        placeholder: &str,
    ) -> StoreResult<()> {
        let said: Vec<(Option<i64>, Option<String>, Option<String>)> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT turn_id, body, transcript FROM inbound_messages
                 WHERE tenant_id = $1 AND conversation_id = $2
                   AND (provider_message_id = $3 OR (kind = 'edit' AND context_id = $3))",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(target)
            .fetch_all(pool)
            .await
        })?;
        for (turn, words) in said.into_iter().filter_map(|(turn, body, transcript)| Some((turn?, body.or(transcript)?)))
        {
            let entries: Vec<(i64, Json<serde_json::Value>)> = reading!(self, pool => {
                sqlx::query_as(
                    "SELECT id, content FROM conversation_messages
                     WHERE tenant_id = $1 AND conversation_id = $2 AND turn_id = $3 AND role = 'user'",
                )
                .bind(tenant.0)
                .bind(conversation.0)
                .bind(turn)
                .fetch_all(pool)
                .await
            })?;
            for (id, Json(mut content)) in entries {
                if !replace_in_strings(&mut content, &words, placeholder) {
                    continue;
                }
                writing!(self, pool => {
                    sqlx::query("UPDATE conversation_messages SET content = $1 WHERE tenant_id = $2 AND id = $3")
                        .bind(Json(&content))
                        .bind(tenant.0)
                        .bind(id)
                        .execute(pool)
                        .await
                        .map(|_| ())
                })?;
            }
        }
        Ok(())
    }
}

/// Replaces `words` with `with` inside every string of `value`. Whether anything changed.
fn replace_in_strings(value: &mut serde_json::Value, words: &str, with: &str) -> bool {
    use serde_json::Value;
    match value {
        Value::String(s) if !words.trim().is_empty() && s.contains(words) => {
            *s = s.replace(words, with);
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |changed, v| replace_in_strings(v, words, with) | changed),
        Value::Object(fields) => {
            fields.values_mut().fold(false, |changed, v| replace_in_strings(v, words, with) | changed)
        }
        _ => false,
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|d| d.is_unique_violation())
}
