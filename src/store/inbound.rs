//! Inbound messages, contacts and conversations.

use chrono::{DateTime, Utc};

use super::tx::conversation_in_tx;
use super::{
    ContactUpsert, ConversationContact, ConversationRef, Dialect, InboundMessage, IntakeStore, IntakeWrite, JobKind,
    Store, StoreError, StoreResult, TurnTiming, Written, reading, writing,
};
use crate::domain::{ContactId, ConversationId, JobId, PayerDocument, PhoneE164, TenantId};
use crate::whatsapp::{ContactIdentity, NewInbound};

/// What storing an inbound message did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    New {
        conversation: ConversationId,
        job: JobId,
    },
    Duplicate,
    /// Sent before an erasure of its sender that committed meanwhile: dropped, as the
    /// intake's gate drops a redelivery (see `admit_in_tx!`).
    Erased,
}

#[derive(sqlx::FromRow)]
struct ContactRow {
    id: i64,
    wa_id: Option<String>,
    user_id: Option<String>,
    profile_name: Option<String>,
    payer_document: Option<String>,
}

#[allow(async_fn_in_trait)]
pub trait InboundStore {
    /// Stores the message once per provider id and, in the same transaction, creates the
    /// conversation's pending turn or pushes its start back (never past the debounce cap). A
    /// duplicate changes nothing: the transaction is rolled back.
    ///
    /// A [`JobKind::Click`] message gets a job of its own instead, created with the message
    /// as its only one and its trigger, so it never joins (or waits for) a debounced turn.
    async fn record_inbound(
        &self,
        tenant: TenantId,
        message: &NewInbound,
        kind: JobKind,
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Recorded>;
    /// [`Self::record_inbound`] for a conversation the caller already looked up
    /// ([`Store::resolve_conversation`]); a new one is created in the message's transaction.
    async fn record_inbound_in(
        &self,
        tenant: TenantId,
        conversation: &ConversationRef,
        message: &NewInbound,
        kind: JobKind,
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Recorded>;
    /// The messages a turn answers, oldest first.
    async fn turn_messages(&self, tenant: TenantId, turn: JobId) -> StoreResult<Vec<InboundMessage>>;
    async fn conversation_contact(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<ConversationContact>;
    async fn count_inbound(&self, tenant: TenantId) -> StoreResult<i64>;
    /// The conversation with contact `contact`, if it has one.
    async fn conversation_of_contact(
        &self,
        tenant: TenantId,
        contact: ContactId,
    ) -> StoreResult<Option<ConversationId>>;
}

impl InboundStore for Store {
    async fn record_inbound(
        &self,
        tenant: TenantId,
        message: &NewInbound,
        kind: JobKind,
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Recorded> {
        let conversation = self.resolve_conversation(tenant, &message.contact).await?;
        self.record_inbound_in(tenant, &conversation, message, kind, timing, now).await
    }

    async fn record_inbound_in(
        &self,
        tenant: TenantId,
        conversation: &ConversationRef,
        message: &NewInbound,
        kind: JobKind,
        timing: &TurnTiming,
        now: DateTime<Utc>,
    ) -> StoreResult<Recorded> {
        let write = IntakeWrite::Message { tenant, conversation: conversation.clone(), message: message.clone(), kind };
        match self.write_intake(&write, timing, now).await? {
            Written::Message(recorded) => Ok(recorded),
            Written::Status(_) => Err(StoreError::Corrupt("a message was written as a status".into())),
        }
    }

    async fn turn_messages(&self, tenant: TenantId, turn: JobId) -> StoreResult<Vec<InboundMessage>> {
        Ok(reading!(self, pool => {
            sqlx::query_as(
                "SELECT id, provider_message_id, kind, body, reply_id, context_id, received_at, simulated_by, media_id,
                        error_code, transcript, transcript_error
                 FROM inbound_messages WHERE tenant_id = $1 AND turn_id = $2 ORDER BY id",
            )
            .bind(tenant.0)
            .bind(turn.0)
            .fetch_all(pool)
            .await
        })?)
    }

    async fn conversation_contact(
        &self,
        tenant: TenantId,
        conversation: ConversationId,
    ) -> StoreResult<ConversationContact> {
        let row: Option<ContactRow> = reading!(self, pool => {
            sqlx::query_as(
                "SELECT c.id, c.wa_id, c.user_id, c.profile_name, c.payer_document
                 FROM conversations v JOIN contacts c ON c.id = v.contact_id AND c.tenant_id = v.tenant_id
                 WHERE v.tenant_id = $1 AND v.id = $2",
            )
            .bind(tenant.0)
            .bind(conversation.0)
            .fetch_optional(pool)
            .await
        })?;
        let ContactRow { id: contact_id, wa_id, user_id, profile_name, payer_document } =
            row.ok_or_else(|| StoreError::NotFound(format!("conversation {conversation}")))?;
        let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(e.to_string());
        let wa_id = wa_id.map(|w| PhoneE164::parse(&w).map_err(|e| corrupt(&e))).transpose()?;
        let payer_document = payer_document
            .map(|d| PayerDocument::parse(&d).map_err(|e| corrupt(&format!("payer document: {e}"))))
            .transpose()?;
        Ok(ConversationContact {
            conversation_id: conversation,
            contact_id: ContactId(contact_id),
            wa_id,
            user_id,
            profile_name,
            payer_document,
        })
    }

    async fn conversation_of_contact(
        &self,
        tenant: TenantId,
        contact: ContactId,
    ) -> StoreResult<Option<ConversationId>> {
        let id: Option<i64> = reading!(self, pool => {
            sqlx::query_scalar("SELECT id FROM conversations WHERE tenant_id = $1 AND contact_id = $2")
                .bind(tenant.0)
                .bind(contact.0)
                .fetch_optional(pool)
                .await
        })?;
        Ok(id.map(ConversationId))
    }

    async fn count_inbound(&self, tenant: TenantId) -> StoreResult<i64> {
        Ok(reading!(self, pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM inbound_messages WHERE tenant_id = $1")
                .bind(tenant.0)
                .fetch_one(pool)
                .await
        })?)
    }
}

/// A stored contact matched by one of an inbound message's identities.
#[derive(sqlx::FromRow)]
pub(super) struct KnownContact {
    external_key: String,
    wa_id: Option<String>,
    user_id: Option<String>,
    username: Option<String>,
    profile_name: Option<String>,
    pub(super) payer_document: Option<String>,
    conversation: Option<i64>,
}

impl KnownContact {
    /// Whether `contact` brings an identity or name this row does not have yet.
    fn lacks(&self, contact: &ContactIdentity) -> bool {
        let new =
            |incoming: Option<&str>, stored: &Option<String>| incoming.is_some_and(|v| Some(v) != stored.as_deref());
        new(contact.wa_id.as_ref().map(PhoneE164::digits), &self.wa_id)
            || new(contact.user_id.as_deref(), &self.user_id)
            || new(contact.username.as_deref(), &self.username)
            || new(contact.profile_name.as_deref(), &self.profile_name)
    }
}

impl Store {
    /// The conversation with this contact as WhatsApp reports it, created on first contact:
    /// [`Self::resolve_conversation`] and, when that finds work to do, the upsert in a
    /// transaction of its own.
    pub async fn ensure_conversation(
        &self,
        tenant: TenantId,
        contact: &ContactIdentity,
        now: DateTime<Utc>,
    ) -> StoreResult<ConversationId> {
        let conversation = self.resolve_conversation(tenant, contact).await?;
        if let ConversationRef::Known(known) = conversation {
            return Ok(known);
        }
        self.upsert_conversation(tenant, &conversation, now).await
    }

    /// The conversation with the person at `phone`, a number someone typed (a charge's
    /// customer, a staff member), created on first contact. A contact found under the other
    /// spelling of a Brazilian mobile keeps the number WhatsApp reported, the one to send to.
    pub async fn conversation_for_phone(
        &self,
        tenant: TenantId,
        phone: &PhoneE164,
        now: DateTime<Utc>,
    ) -> StoreResult<ConversationId> {
        let known = self.find_contact(tenant, &ContactIdentity::phone(phone.clone())).await?;
        if let Some(conversation) = known.as_ref().and_then(|k| k.conversation) {
            return Ok(ConversationId(conversation));
        }
        let conversation = ConversationRef::Upsert(Box::new(ContactUpsert {
            wa_id: known.as_ref().is_none_or(|k| k.wa_id.is_none()).then(|| phone.digits().to_owned()),
            key: known.map_or_else(|| phone.match_key(), |k| k.external_key),
            user_id: None,
            username: None,
            profile_name: None,
        }));
        self.upsert_conversation(tenant, &conversation, now).await
    }

    async fn upsert_conversation(
        &self,
        tenant: TenantId,
        conversation: &ConversationRef,
        now: DateTime<Utc>,
    ) -> StoreResult<ConversationId> {
        writing!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let id = conversation_in_tx!(tx, tenant, conversation, now)?;
            tx.commit().await?;
            Ok(id)
        })
    }

    /// Finds the conversation with this contact by one read. Contacts and conversations are
    /// never deleted while their tenant exists, so the common case ends here, outside any write
    /// transaction; a first contact, or a contact bringing an identity or name not stored yet,
    /// yields the upsert to run in the transaction that stores the message
    /// ([`conversation_in_tx!`]), so a first message costs one commit, not two.
    ///
    /// A contact is found by its `wa_id` first, else by its business-scoped user id; an
    /// identity seen for the first time is attached to the contact found, so a customer who
    /// once wrote with both keeps one contact (and its bookings) when only one arrives.
    pub async fn resolve_conversation(
        &self,
        tenant: TenantId,
        contact: &ContactIdentity,
    ) -> StoreResult<ConversationRef> {
        let known = self.find_contact(tenant, contact).await?;
        if let Some(known) = &known
            && let Some(conversation) = known.conversation
            && !known.lacks(contact)
        {
            return Ok(ConversationRef::Known(ConversationId(conversation)));
        }
        // The contact found (by any identity) is upserted under its own key, so a new
        // identity (or the number WhatsApp now reports for it) is attached to it instead of
        // starting another contact.
        Ok(ConversationRef::Upsert(Box::new(match known {
            Some(known) => ContactUpsert::keyed(contact, known.external_key),
            None => ContactUpsert::of(contact),
        })))
    }

    /// The stored contact `contact` is, by its key (a Brazilian mobile's with or without the
    /// ninth digit), its `wa_id` or its user id, with its conversation if it has one.
    pub(super) async fn find_contact(
        &self,
        tenant: TenantId,
        contact: &ContactIdentity,
    ) -> StoreResult<Option<KnownContact>> {
        let external_key = contact
            .external_key()
            .ok_or_else(|| StoreError::Corrupt("inbound message without wa_id or user_id".into()))?;
        let wa_id = contact.wa_id.as_ref().map(PhoneE164::digits);
        reading!(self, pool => {
            sqlx::query_as(
                // One indexed lookup per identity: with `OR` across the three columns SQLite
                // scanned every contact of the tenant, once per message.
                "SELECT c.external_key, c.wa_id, c.user_id, c.username, c.profile_name, c.payer_document,
                        v.id AS conversation
                 FROM (SELECT id FROM contacts WHERE tenant_id = $1 AND external_key = $2
                       UNION SELECT id FROM contacts WHERE tenant_id = $1 AND wa_id = $3
                       UNION SELECT id FROM contacts WHERE tenant_id = $1 AND user_id = $4) matched
                 JOIN contacts c ON c.id = matched.id AND c.tenant_id = $1
                 LEFT JOIN conversations v ON v.tenant_id = c.tenant_id AND v.contact_id = c.id
                 ORDER BY CASE WHEN c.external_key = $2 OR c.wa_id = $3 THEN 0 ELSE 1 END, c.id
                 LIMIT 1",
            )
            .bind(tenant.0)
            .bind(&external_key)
            .bind(wa_id)
            .bind(contact.user_id.as_deref())
            .fetch_optional(pool)
            .await
        })
        .map_err(Into::into)
    }
}
