//! Outbound messages, checked against the Cloud API limits when built and again before
//! sending (stored rows are data, and data can be old).
//!
//! Most kinds map to one `POST /messages` body. A Pix QR code does not: its PNG is rendered and
//! uploaded at send time (`POST /media`), and the image message then references the upload
//! ([`UploadedImage`]), so only the payload is stored.

use serde::{Deserialize, Serialize};

use crate::domain::{Cents, PhoneE164};

// Limits from Meta's reply-button, list and text pages (characters, not bytes). Public so
// builders can clip to them by construction instead of failing validation.
pub const TEXT_BODY_MAX: usize = 4096;
pub const INTERACTIVE_BODY_MAX: usize = 1024;
pub const FOOTER_MAX: usize = 60;
pub const BUTTONS_MAX: usize = 3;
pub const BUTTON_TITLE_MAX: usize = 20;
pub const BUTTON_ID_MAX: usize = 256;
pub const LIST_BUTTON_MAX: usize = 20;
pub const LIST_SECTIONS_MAX: usize = 10;
/// Rows across all sections of one list.
pub const LIST_ROWS_MAX: usize = 10;
pub const LIST_ROW_ID_MAX: usize = 200;
pub const LIST_ROW_TITLE_MAX: usize = 24;
pub const LIST_ROW_DESCRIPTION_MAX: usize = 72;
pub const LIST_SECTION_TITLE_MAX: usize = 24;
// Image messages page: caption "Maximum 1024 characters".
pub const IMAGE_CAPTION_MAX: usize = 1024;
// Template limits. The reference documents the send shape only; these come from Meta's template
// pages as quoted by public clients (UNVERIFIED against Meta verbatim): a name of lowercase
// letters, digits and underscores up to 512 characters, at most 10 buttons per template, and a
// body parameter of up to 1024 characters when the template has other components (32768 for a
// body-only one: we hold to the lower).
pub const TEMPLATE_NAME_MAX: usize = 512;
pub const TEMPLATE_QUICK_REPLIES_MAX: usize = 10;
pub const TEMPLATE_PARAM_MAX: usize = 1024;
/// Meta documents no limit for a quick-reply payload; it carries the same action token as a
/// reply button's id, so it keeps that id's limit.
pub const QUICK_REPLY_PAYLOAD_MAX: usize = BUTTON_ID_MAX;
/// Meta rejects a template parameter with more consecutive spaces than this (or a newline/tab).
const TEMPLATE_PARAM_SPACES_MAX: usize = 4;
// Orders API: `reference_id` is letters, digits, `_`, `-` and `.`, at most 35 characters (Meta's
// Orders API pages; Brazil edition UNVERIFIED). A Bacen `txid` (26 to 35 alphanumerics) fits.
pub const ORDER_REFERENCE_ID_MAX: usize = 35;
/// `pix_dynamic_code.key_type` values (whatsapp-pix-orders.md).
pub const PIX_KEY_TYPES: &[&str] = &["CPF", "CNPJ", "EMAIL", "PHONE", "EVP"];
/// Order statuses named in the Orders API pages (whatsapp-pix-orders.md).
pub const ORDER_STATUSES: &[&str] = &["pending", "processing", "partially_shipped", "shipped", "completed", "canceled"];
/// Amounts travel as `{ value, offset }`: `value / offset` reais, so an offset of 100 is cents.
const AMOUNT_OFFSET: i64 = 100;
/// What a QR code without a caption reads as.
const QR_IMAGE_LABEL: &str = "[QR Code Pix]";
/// What a location without a name or address reads as.
const LOCATION_LABEL: &str = "[localização]";

/// `text` cut to at most `max` characters on a character boundary, ending in "…" when
/// something was cut, so a long catalog name shortens instead of breaking the message.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let mut clipped: String = text.chars().take(max.saturating_sub(1)).collect();
    clipped.push('…');
    clipped
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyButton {
    pub id: String,
    pub title: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRow {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListSection {
    pub title: Option<String>,
    pub rows: Vec<ListRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutboundMessage {
    Text {
        body: String,
    },
    Buttons {
        body: String,
        footer: Option<String>,
        buttons: Vec<ReplyButton>,
    },
    List {
        body: String,
        footer: Option<String>,
        /// The label of the button that opens the list.
        button: String,
        sections: Vec<ListSection>,
    },
    /// A pre-approved template: the only kind Meta delivers outside the 24-hour window.
    /// `quick_replies` are the payloads of the template's quick-reply buttons, in order; a tap
    /// comes back as a `type: button` message carrying the payload.
    Template {
        name: String,
        /// Meta's language code, e.g. `pt_BR`.
        language: String,
        body_params: Vec<String>,
        quick_replies: Vec<String>,
    },
    /// A Pix QR code image: `payload` (the BR Code) is rendered to a PNG and uploaded at send
    /// time.
    QrImage {
        payload: String,
        caption: Option<String>,
    },
    /// An `order_details` message with a Pix dynamic code (Payments API, Brazil). Meta refuses it
    /// on numbers not enabled for payments; the sender then sends `fallback` as plain text.
    OrderDetails {
        /// Unique per order and stable across retries (the charge's id).
        reference_id: String,
        body: String,
        footer: Option<String>,
        amount: Cents,
        /// The order's one item.
        description: String,
        /// The BR Code, "Pix copia e cola".
        copia_e_cola: String,
        merchant_name: String,
        pix_key: String,
        /// One of [`PIX_KEY_TYPES`].
        key_type: String,
        /// Plain text with the amount, the description and the copia e cola.
        fallback: String,
    },
    /// A pin on the map (the business's address). Meta takes the coordinates as decimal-degree
    /// strings; `name` and `address` show under the map.
    Location {
        latitude: String,
        longitude: String,
        name: Option<String>,
        address: Option<String>,
    },
    /// An `order_status` update for an earlier `order_details` with the same `reference_id`.
    OrderStatus {
        reference_id: String,
        /// One of [`ORDER_STATUSES`], e.g. `completed` once the payment is confirmed.
        status: String,
        body: String,
    },
}

mod graph;
#[cfg(test)]
mod tests;
mod validate;

pub use graph::UploadedImage;
pub use validate::MessageError;

impl OutboundMessage {
    pub fn text(body: impl Into<String>) -> Result<Self, MessageError> {
        let m = Self::Text { body: body.into() };
        m.validate()?;
        Ok(m)
    }

    pub fn buttons(
        body: impl Into<String>,
        footer: Option<String>,
        buttons: Vec<ReplyButton>,
    ) -> Result<Self, MessageError> {
        let m = Self::Buttons { body: body.into(), footer, buttons };
        m.validate()?;
        Ok(m)
    }

    pub fn list(
        body: impl Into<String>,
        footer: Option<String>,
        button: impl Into<String>,
        sections: Vec<ListSection>,
    ) -> Result<Self, MessageError> {
        let m = Self::List { body: body.into(), footer, button: button.into(), sections };
        m.validate()?;
        Ok(m)
    }

    pub fn template(
        name: impl Into<String>,
        language: impl Into<String>,
        body_params: Vec<String>,
        quick_replies: Vec<String>,
    ) -> Result<Self, MessageError> {
        let m = Self::Template { name: name.into(), language: language.into(), body_params, quick_replies };
        m.validate()?;
        Ok(m)
    }

    pub fn qr_image(payload: impl Into<String>, caption: Option<String>) -> Result<Self, MessageError> {
        let m = Self::QrImage { payload: payload.into(), caption };
        m.validate()?;
        Ok(m)
    }
    pub fn location(
        latitude: f64,
        longitude: f64,
        name: Option<String>,
        address: Option<String>,
    ) -> Result<Self, MessageError> {
        let m = Self::Location { latitude: latitude.to_string(), longitude: longitude.to_string(), name, address };
        m.validate()?;
        Ok(m)
    }

    /// The text a person sees first, for logs, the simulator and tests. A template's text lives
    /// at Meta, so it is the template's name; a QR code without a caption is "[QR Code Pix]".
    /// [`OutboundMessage::preview`] shows a template's parameters too.
    pub fn body(&self) -> &str {
        match self {
            Self::Text { body }
            | Self::Buttons { body, .. }
            | Self::List { body, .. }
            | Self::OrderDetails { body, .. }
            | Self::OrderStatus { body, .. } => body,
            Self::Template { name, .. } => name,
            Self::QrImage { caption, .. } => caption.as_deref().unwrap_or(QR_IMAGE_LABEL),
            Self::Location { address, name, .. } => address.as_deref().or(name.as_deref()).unwrap_or(LOCATION_LABEL),
        }
    }

    /// One readable line for logs: the body, with a template's name and parameters.
    pub fn preview(&self) -> String {
        match self {
            Self::Template { name, body_params, .. } if body_params.is_empty() => format!("[template {name}]"),
            Self::Template { name, body_params, .. } => format!("[template {name}] {}", body_params.join(" · ")),
            Self::QrImage { caption: Some(c), .. } => format!("{QR_IMAGE_LABEL} {c}"),
            other => other.body().to_owned(),
        }
    }
}

/// Who receives a message: the `wa_id` we were written from, else the business-scoped user
/// id. Never a number rebuilt from user input (Brazil's ninth digit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    pub wa_id: Option<PhoneE164>,
    pub user_id: Option<String>,
}
