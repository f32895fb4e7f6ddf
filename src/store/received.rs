//! The intake's rows: a stored inbound message as a turn sees it, the person on the other side,
//! a message's conversation (known, or to upsert with its contact), one write the intake makes
//! and what it did. See `crate::inbound` for the invariants.

use chrono::{DateTime, Utc};

use super::{JobKind, Recorded};
use crate::domain::{ConversationId, PhoneE164, TenantId};
use crate::whatsapp::webhook::StatusUpdate;
use crate::whatsapp::{ContactIdentity, NewInbound};

/// A stored inbound message, as a turn sees it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InboundMessage {
    pub id: i64,
    pub provider_message_id: String,
    pub kind: String,
    pub body: Option<String>,
    pub reply_id: Option<String>,
    pub context_id: Option<String>,
    pub received_at: DateTime<Utc>,
    /// Who typed it in the simulator; `None` from WhatsApp.
    pub simulated_by: Option<String>,
    /// A voice note's or audio's Graph media id.
    pub media_id: Option<String>,
    /// Meta's error code on an unsupported or error-only message.
    pub error_code: Option<i64>,
    /// A voice note's text, once transcribed; or why it could not be.
    pub transcript: Option<String>,
    pub transcript_error: Option<String>,
}

impl InboundMessage {
    /// For a voice note nobody could hear, as a turn is handed it (kind `audio`, no text):
    /// whether hearing it failed (`false`: no transcription endpoint is configured).
    pub fn unheard_voice(&self) -> Option<bool> {
        (self.kind == crate::whatsapp::stored::AUDIO && self.body.is_none()).then_some(self.transcript_error.is_some())
    }
}

/// The person on the other side of a conversation.
#[derive(Debug, Clone)]
pub struct ConversationContact {
    pub conversation_id: ConversationId,
    pub contact_id: crate::domain::ContactId,
    pub wa_id: Option<PhoneE164>,
    pub user_id: Option<String>,
    pub profile_name: Option<String>,
    /// The CPF or CNPJ a Pix provider identifies the payer by, once someone gave it.
    pub payer_document: Option<crate::domain::PayerDocument>,
}

/// A message's conversation as the read before its write found it
/// ([`crate::store::Store::resolve_conversation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConversationRef {
    /// Stored, with everything the message says about its contact.
    Known(ConversationId),
    /// A first contact, or one bringing an identity or name not stored yet: upserted in the
    /// transaction that stores the message. Boxed: rare, and a write stays small in the queues.
    Upsert(Box<ContactUpsert>),
}

/// A contact and its conversation to upsert: the contact's key (the stored contact's own
/// when an identity is being attached to it) and what the message says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactUpsert {
    pub key: String,
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
    pub username: Option<String>,
    pub profile_name: Option<String>,
}

impl ContactUpsert {
    /// The contact a message's sender is, stored under `key`.
    pub fn keyed(contact: &ContactIdentity, key: String) -> Self {
        Self {
            key,
            wa_id: contact.wa_id.as_ref().map(|w| w.digits().to_owned()),
            user_id: contact.user_id.clone(),
            username: contact.username.clone(),
            profile_name: contact.profile_name.clone(),
        }
    }

    /// The sender as a contact of their own, under their own key.
    pub fn of(contact: &ContactIdentity) -> Self {
        Self::keyed(contact, contact.external_key().unwrap_or_default())
    }
}

/// One write the intake makes for a verified webhook element.
#[derive(Debug, Clone)]
#[expect(clippy::large_enum_variant, reason = "messages are most writes; boxing would allocate one per message")]
pub enum IntakeWrite {
    /// A customer's message, its conversation (created in the same transaction when new) and
    /// the job it feeds.
    Message { tenant: TenantId, conversation: ConversationRef, message: NewInbound, kind: JobKind },
    /// A delivery status for one of our outbound messages.
    Status { tenant: TenantId, update: StatusUpdate },
}

/// What an [`IntakeWrite`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Message(Recorded),
    /// Whether the status moved an outbound message forward.
    Status(bool),
}
