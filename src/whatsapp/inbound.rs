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

/// What the customer sent, reduced to what the bot acts on. Every kind Meta documents has a
/// variant; a type we do not know is kept as [`InboundContent::Unsupported`] with its name.
/// What each kind gets (answered, silent, an effect) is decided in one place:
/// `crate::turns::kinds`.
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
    /// A reaction to message `to` (hashed id); no emoji when the reaction was removed.
    Reaction {
        to: String,
        emoji: Option<String>,
    },
    /// A new text for message `of` (hashed id).
    Edit {
        of: String,
        body: Option<String>,
    },
    /// The customer deleted message `of` (hashed id) for everyone.
    Revoke {
        of: String,
    },
    /// The system notice that the customer moved to `number`.
    NumberChange {
        number: PhoneE164,
    },
    /// A first contact opened the chat (`request_welcome`).
    Welcome,
    /// An image, video, document, sticker, location or contact card; `label` is its caption
    /// (or a location's name and address, a card's name).
    Media {
        kind: MediaKind,
        label: Option<String>,
    },
    /// An audio file or a voice note, fetched and transcribed by its Graph media id.
    Audio {
        media_id: String,
    },
    /// A type we do not handle, or a message Meta could not deliver (`errors[]` only), with
    /// Meta's error code.
    Unsupported {
        kind: String,
        error_code: Option<i64>,
    },
}

/// The media kinds that are stored and described, not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Video,
    Document,
    Sticker,
    Location,
    Contacts,
}

impl MediaKind {
    pub const ALL: [Self; 6] =
        [Self::Image, Self::Video, Self::Document, Self::Sticker, Self::Location, Self::Contacts];

    /// Meta's `type` for it, which is also the stored kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Video => "video",
            Self::Document => "document",
            Self::Sticker => "sticker",
            Self::Location => "location",
            Self::Contacts => "contacts",
        }
    }

    pub fn parse(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

/// The stored kinds (`inbound_messages.kind`) the code branches on: Meta's own `type` names,
/// and ours for the variants that have none.
pub mod stored {
    pub const TEXT: &str = "text";
    pub const REACTION: &str = "reaction";
    pub const EDIT: &str = "edit";
    pub const REVOKE: &str = "revoke";
    pub const SYSTEM: &str = "system";
    pub const AUDIO: &str = "audio";
    pub const BUTTON_REPLY: &str = "button_reply";
    pub const LIST_REPLY: &str = "list_reply";
    pub const QUICK_REPLY: &str = "quick_reply";
    pub const NUMBER_CHANGE: &str = "number_change";
    pub const WELCOME: &str = "request_welcome";
}

impl InboundContent {
    /// The kind stored with the message (`inbound_messages.kind`).
    pub fn kind(&self) -> &str {
        match self {
            Self::Text { .. } => stored::TEXT,
            Self::ButtonReply { .. } => stored::BUTTON_REPLY,
            Self::ListReply { .. } => stored::LIST_REPLY,
            Self::QuickReply { .. } => stored::QUICK_REPLY,
            Self::Reaction { .. } => stored::REACTION,
            Self::Edit { .. } => stored::EDIT,
            Self::Revoke { .. } => stored::REVOKE,
            Self::NumberChange { .. } => stored::NUMBER_CHANGE,
            Self::Welcome => stored::WELCOME,
            Self::Media { kind, .. } => kind.as_str(),
            Self::Audio { .. } => stored::AUDIO,
            Self::Unsupported { kind, .. } => kind,
        }
    }

    /// The text stored with it: the message body, the chosen option's title, an edit's new
    /// text, a reaction's emoji, a caption, or the new number of a number change.
    pub fn body(&self) -> Option<&str> {
        match self {
            Self::Text { body } => Some(body),
            Self::ButtonReply { title, .. } | Self::ListReply { title, .. } => Some(title),
            Self::QuickReply { text, .. } => Some(text),
            Self::Reaction { emoji, .. } => emoji.as_deref(),
            Self::Edit { body, .. } => body.as_deref(),
            Self::NumberChange { number } => Some(number.as_str()),
            Self::Media { label, .. } => label.as_deref(),
            Self::Revoke { .. } | Self::Welcome | Self::Audio { .. } | Self::Unsupported { .. } => None,
        }
    }

    /// The machine id carried by a click.
    pub fn reply_id(&self) -> Option<&str> {
        match self {
            Self::ButtonReply { id, .. } | Self::ListReply { id, .. } => Some(id),
            Self::QuickReply { payload, .. } => Some(payload),
            _ => None,
        }
    }

    /// The message a reaction, an edit or a deletion is about (hashed id): stored as the
    /// message's `context_id`.
    pub fn refers_to(&self) -> Option<&str> {
        match self {
            Self::Reaction { to, .. } => Some(to),
            Self::Edit { of, .. } | Self::Revoke { of } => Some(of),
            _ => None,
        }
    }

    pub fn media_id(&self) -> Option<&str> {
        match self {
            Self::Audio { media_id } => Some(media_id),
            _ => None,
        }
    }

    pub fn error_code(&self) -> Option<i64> {
        match self {
            Self::Unsupported { error_code, .. } => *error_code,
            _ => None,
        }
    }
}

/// One inbound message, parsed and ready to store.
#[derive(Debug, Clone)]
pub struct NewInbound {
    pub provider_message_id: String,
    pub contact: ContactIdentity,
    pub content: InboundContent,
    /// The outbound message a click answers (`context.id`), or the message a reaction, an
    /// edit or a deletion is about ([`InboundContent::refers_to`]).
    pub context_id: Option<String>,
    pub sent_at: Option<DateTime<Utc>>,
    /// The element as received, for audit and for features that need more fields later.
    pub raw: serde_json::Value,
    /// Who typed it in the simulator (an admin's e-mail, or how the simulator was opened);
    /// `None` for every message from WhatsApp. Never read from the wire.
    pub simulated_by: Option<String>,
    /// The sender's identities as erasure tombstones keep them (keyed hashes,
    /// [`crate::domain::PrivacyKey::identities`]): what the intake checks a message against an
    /// erasure by, before and inside the transaction that stores it.
    pub sender_hashes: Vec<String>,
}
