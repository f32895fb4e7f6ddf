//! The outbox's rows: a reply to queue under its idempotency key, where it goes, a row claimed
//! for sending, a row as the console reads it. See `crate::outbox` for the invariants.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::Lease;
use crate::domain::{ConversationId, JobId, OutboundId, TenantId};
use crate::whatsapp::{OutboundMessage, Recipient};

/// Meta echoes at most 512 characters of `biz_opaque_callback_data`.
const KEY_MAX: usize = 512;

/// The outbox idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OutboxKey(String);

impl OutboxKey {
    /// The `seq`-th reply of a turn.
    pub fn for_turn(turn: JobId, seq: u32) -> Self {
        Self(format!("turn:{turn}:{seq}"))
    }

    /// A key chosen by another feature (`<namespace>:<id>…`).
    pub fn parse(raw: &str) -> Option<Self> {
        (raw.contains(':') && !raw.trim().is_empty() && raw.len() <= KEY_MAX).then(|| Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A reply to put in the outbox.
#[derive(Debug, Clone)]
pub struct NewOutbound {
    pub tenant: TenantId,
    pub conversation: ConversationId,
    pub key: OutboxKey,
    pub recipient: Recipient,
    pub message: OutboundMessage,
    /// Stay local (no access token): never sent.
    pub local: bool,
    /// The job lease of the turn writing it: the row is refused once that lease is lost.
    pub written_by: Option<Lease>,
    /// Not queued (as if already there) while a person has the conversation: the bot's reply
    /// to a customer turn ([`crate::jobs::Turn::yields_to_person`]).
    pub unless_handed_off: bool,
}

/// A conversation messages are queued to outside a turn (a charge, a proposal, a reminder):
/// its recipient, and whether it stays local. Built by [`Replier::destination`].
#[derive(Debug, Clone)]
pub struct Destination {
    pub tenant: TenantId,
    pub conversation: ConversationId,
    pub recipient: Recipient,
    pub local: bool,
}

impl Destination {
    /// The row for `message` under `key`; `None` when `key` is not a valid outbox key.
    pub fn message(&self, key: String, message: OutboundMessage) -> Option<NewOutbound> {
        Some(NewOutbound {
            tenant: self.tenant,
            conversation: self.conversation,
            key: OutboxKey::parse(&key)?,
            recipient: self.recipient.clone(),
            message,
            local: self.local,
            written_by: None,
            unless_handed_off: false,
        })
    }
}

/// A row a sender holds.
#[derive(Debug, Clone)]
pub struct ClaimedOutbound {
    pub id: OutboundId,
    pub tenant: TenantId,
    pub key: String,
    pub recipient: Recipient,
    pub message: Json<OutboundMessage>,
    pub attempt: i64,
}

/// An outbox row as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboundRecord {
    pub id: i64,
    pub conversation_id: i64,
    pub idempotency_key: String,
    pub status: String,
    pub message: Json<OutboundMessage>,
    pub provider_message_id: Option<String>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
}
