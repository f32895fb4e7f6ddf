//! A customer's message as the webhook delivered it, parsed: who wrote and what they sent,
//! reduced to what the bot acts on ([`super::webhook`] builds it; the intake stores it).

use chrono::{DateTime, Utc};

use crate::domain::PhoneE164;

/// Who wrote: WhatsApp's `wa_id` when present, else the business-scoped user id (2026).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactIdentity {
    pub wa_id: Option<PhoneE164>,
    pub user_id: Option<String>,
    pub username: Option<String>,
    pub profile_name: Option<String>,
}

impl ContactIdentity {
    /// Only a number, as someone typed it (a charge's customer, a staff member).
    pub fn phone(phone: PhoneE164) -> Self {
        Self { wa_id: Some(phone), user_id: None, username: None, profile_name: None }
    }

    /// The key a contact is stored under: the `wa_id`'s [`PhoneE164::match_key`] (one contact
    /// with or without a Brazilian mobile's ninth digit), else `bsuid:<user id>`.
    pub fn external_key(&self) -> Option<String> {
        match (&self.wa_id, &self.user_id) {
            (Some(wa), _) => Some(wa.match_key()),
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
    /// Who typed it in the simulator (an admin's e-mail, or how the simulator was opened);
    /// `None` for every message from WhatsApp. Never read from the wire.
    pub simulated_by: Option<String>,
}
