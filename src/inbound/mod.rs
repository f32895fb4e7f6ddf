//! Verified webhook payloads become deduplicated rows and turn jobs.
//!
//! Invariants:
//! - a provider message id is stored at most once per tenant (unique index,
//!   `INSERT … ON CONFLICT DO NOTHING`), and its turn job is enqueued or extended in the same
//!   transaction, so a duplicate delivery (sequential or concurrent) changes nothing;
//! - one bad element of a batch is logged and counted; its siblings are still processed;
//! - writes are committed in groups across concurrent requests ([`group_commit`]), and a
//!   request is answered only after its writes committed;
//! - no model or provider call happens here: the webhook answers fast.

pub mod group_commit;
mod ingest;

pub use group_commit::GroupCommit;
pub use ingest::{IngestReport, ingest};

use chrono::{DateTime, Utc};

use crate::domain::{ConversationId, PhoneE164, TenantId};
use crate::jobs::JobKind;
use crate::store::Recorded;
use crate::whatsapp::webhook::StatusUpdate;

/// Who wrote: WhatsApp's `wa_id` when present, else the business-scoped user id (2026).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactIdentity {
    pub wa_id: Option<PhoneE164>,
    pub user_id: Option<String>,
    pub username: Option<String>,
    pub profile_name: Option<String>,
}

impl ContactIdentity {
    /// The key a contact is stored under: the `wa_id` digits, else `bsuid:<user id>`.
    pub fn external_key(&self) -> Option<String> {
        match (&self.wa_id, &self.user_id) {
            (Some(wa), _) => Some(wa.digits().to_owned()),
            (None, Some(user)) => Some(format!("bsuid:{user}")),
            (None, None) => None,
        }
    }
}

/// What the customer sent, reduced to what the bot acts on. Every other type is kept with its
/// name rather than dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundContent {
    Text {
        body: String,
    },
    /// `interactive.button_reply`.
    ButtonReply {
        id: String,
        title: String,
    },
    /// `interactive.list_reply`.
    ListReply {
        id: String,
        title: String,
    },
    /// A template quick-reply button (`type: "button"`).
    QuickReply {
        payload: String,
        text: String,
    },
    Other {
        kind: String,
    },
}

impl InboundContent {
    pub fn kind(&self) -> &str {
        match self {
            Self::Text { .. } => "text",
            Self::ButtonReply { .. } => "button_reply",
            Self::ListReply { .. } => "list_reply",
            Self::QuickReply { .. } => "quick_reply",
            Self::Other { kind } => kind,
        }
    }

    /// The text a person would read: the message body or the chosen option's title.
    pub fn body(&self) -> Option<&str> {
        match self {
            Self::Text { body } => Some(body),
            Self::ButtonReply { title, .. } | Self::ListReply { title, .. } => Some(title),
            Self::QuickReply { text, .. } => Some(text),
            Self::Other { .. } => None,
        }
    }

    /// The machine id carried by a click.
    pub fn reply_id(&self) -> Option<&str> {
        match self {
            Self::ButtonReply { id, .. } | Self::ListReply { id, .. } => Some(id),
            Self::QuickReply { payload, .. } => Some(payload),
            Self::Text { .. } | Self::Other { .. } => None,
        }
    }
}

/// One inbound message, parsed and ready to store.
#[derive(Debug, Clone)]
pub struct NewInbound {
    pub provider_message_id: String,
    pub contact: ContactIdentity,
    pub content: InboundContent,
    /// The outbound message a click answers (`context.id`).
    pub context_id: Option<String>,
    pub sent_at: Option<DateTime<Utc>>,
    /// The element as received, for audit and for features that need more fields later.
    pub raw: serde_json::Value,
}

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
}

/// The person on the other side of a conversation.
#[derive(Debug, Clone)]
pub struct ConversationContact {
    pub conversation_id: ConversationId,
    pub contact_id: crate::domain::ContactId,
    pub wa_id: Option<PhoneE164>,
    pub user_id: Option<String>,
    pub profile_name: Option<String>,
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

/// One write the intake makes for a verified webhook element.
#[derive(Debug, Clone)]
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
