//! What some kinds of inbound message do to stored rows (see `crate::turns::kinds`): a deletion
//! removes its message's text, an edit replaces it, a number change moves the contact, and a
//! voice note's transcript is kept once.
//!
//! Invariants: every statement names its tenant and the conversation the message came in, so a
//! message can only touch its own conversation's rows; each is idempotent, so a retried turn
//! changes nothing more.

use serde_json::json;
use sqlx::types::Json;

use super::{Store, StoreResult, changed_one, reading, writing};
use crate::domain::{ContactId, ConversationId, JobId, PhoneE164, TenantId};

/// What became of a number change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberMoved {
    Moved,
    /// Another contact already has the new number; both stay as they are.
    Taken(ContactId),
    /// The contact already had it (a redelivered notice).
    Unchanged,
}

#[allow(async_fn_in_trait)]
pub trait MessageEffectStore {
    /// Removes the text of message `target` (a hashed provider id) of `conversation`: body,
    /// transcript and raw element. Whether it was found.
    async fn revoke_message(&self, tenant: TenantId, conversation: ConversationId, target: &str) -> StoreResult<bool>;
    /// Replaces the text of message `target` when it belongs to turn `turn` (its turn has not
    /// answered it yet). Whether it did.
    async fn edit_message(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        target: &str,
        turn: JobId,
        body: &str,
    ) -> StoreResult<bool>;
    /// Gives contact `contact` the number `number` (its key becomes the number's match key):
    /// the same contact, conversation, bookings and history, reached at the new number.
    async fn move_contact_number(
        &self,
        tenant: TenantId,
        contact: ContactId,
        number: &PhoneE164,
    ) -> StoreResult<NumberMoved>;
    /// Keeps a voice note's transcript or why it failed, unless one is already kept; returns
    /// what is kept (the first writer's), as (transcript, error).
    async fn keep_transcript(
        &self,
        tenant: TenantId,
        message: i64,
        result: Result<&str, &str>,
    ) -> StoreResult<(Option<String>, Option<String>)>;
}

impl MessageEffectStore for Store {
    async fn revoke_message(&self, tenant: TenantId, conversation: ConversationId, target: &str) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE inbound_messages SET body = NULL, transcript = NULL, raw = $1
                 WHERE tenant_id = $2 AND conversation_id = $3 AND provider_message_id = $4",
            )
            .bind(Json(json!({ "revoked": true })))
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(target)
            .execute(pool)
            .await
            .map(changed_one)
        })?)
    }

    async fn edit_message(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
        target: &str,
        turn: JobId,
        body: &str,
    ) -> StoreResult<bool> {
        Ok(writing!(self, pool => {
            sqlx::query(
                "UPDATE inbound_messages SET body = $1
                 WHERE tenant_id = $2 AND conversation_id = $3 AND provider_message_id = $4 AND turn_id = $5
                   AND kind = 'text'",
            )
            .bind(body)
            .bind(tenant.0)
            .bind(conversation.0)
            .bind(target)
            .bind(turn.0)
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
    ) -> StoreResult<NumberMoved> {
        let key = number.match_key();
        let holder: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT id FROM contacts WHERE tenant_id = $1 AND (external_key = $2 OR wa_id = $3)")
                .bind(tenant.0)
                .bind(&key)
                .bind(number.as_str())
                .fetch_optional(pool)
                .await
        })?;
        match holder {
            Some(id) if id == contact.0 => return Ok(NumberMoved::Unchanged),
            Some(id) => return Ok(NumberMoved::Taken(ContactId(id))),
            None => {}
        }
        // The unique key refuses a contact created with the new number meanwhile.
        let moved = writing!(self, pool => {
            sqlx::query(
                "UPDATE contacts SET external_key = $1, wa_id = $2
                 WHERE tenant_id = $3 AND id = $4
                   AND NOT EXISTS (SELECT 1 FROM contacts o WHERE o.tenant_id = $3 AND o.id <> $4 AND o.wa_id = $2)",
            )
            .bind(&key)
            .bind(number.as_str())
            .bind(tenant.0)
            .bind(contact.0)
            .execute(pool)
            .await
            .map(changed_one)
        });
        match moved {
            Ok(true) => Ok(NumberMoved::Moved),
            Ok(_) => Ok(NumberMoved::Unchanged),
            Err(e) if is_unique_violation(&e) => Ok(NumberMoved::Taken(contact)),
            Err(e) => Err(e.into()),
        }
    }

    async fn keep_transcript(
        &self,
        tenant: TenantId,
        message: i64,
        result: Result<&str, &str>,
    ) -> StoreResult<(Option<String>, Option<String>)> {
        let (text, error) = match result {
            Ok(text) => (Some(text), None),
            Err(error) => (None, Some(error)),
        };
        Ok(writing!(self, pool => {
            sqlx::query_as(
                "UPDATE inbound_messages
                 SET transcript = CASE WHEN transcript IS NULL AND transcript_error IS NULL THEN $1 ELSE transcript END,
                     transcript_error = CASE WHEN transcript IS NULL AND transcript_error IS NULL THEN $2
                                             ELSE transcript_error END
                 WHERE tenant_id = $3 AND id = $4
                 RETURNING transcript, transcript_error",
            )
            .bind(text)
            .bind(error)
            .bind(tenant.0)
            .bind(message)
            .fetch_one(pool)
            .await
        })?)
    }
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|d| d.is_unique_violation())
}
