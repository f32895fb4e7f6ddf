//! Meta's webhook payloads, parsed element by element.
//!
//! A batch is `entry[] × changes[] × messages[]/statuses[]`. Each element is deserialized on
//! its own, so one that fails is reported and its siblings still come through. Every identity
//! field is optional (business-scoped user ids, 2026), and message types are an open set:
//! anything but text and clicks is kept with its type name.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::{ContactIdentity, InboundContent, NewInbound};
use crate::domain::{PhoneE164, PrivacyKey};

/// Delivery states, in the order they can only move forward (`failed` is terminal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DeliveryStatus {
    Sent = 1,
    Delivered = 2,
    Read = 3,
    Failed = 4,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
        }
    }
    pub fn rank(self) -> i64 {
        self as i64
    }
}

/// A `statuses[]` element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusUpdate {
    pub provider_message_id: String,
    pub status: DeliveryStatus,
    /// `biz_opaque_callback_data`: our outbox key, echoed back.
    pub callback_key: Option<String>,
    pub error: Option<String>,
}

/// One `changes[]` element addressed to a business number.
#[derive(Debug, Clone, Default)]
pub struct ParsedChange {
    pub phone_number_id: String,
    pub messages: Vec<NewInbound>,
    pub statuses: Vec<StatusUpdate>,
}

/// Everything usable in a body, plus a description of each element that was not.
#[derive(Debug, Default)]
pub struct ParsedBatch {
    pub changes: Vec<ParsedChange>,
    pub errors: Vec<String>,
}

#[derive(Deserialize)]
struct RawContact {
    wa_id: Option<String>,
    user_id: Option<String>,
    profile: Option<RawProfile>,
}

#[derive(Deserialize)]
struct RawProfile {
    name: Option<String>,
    username: Option<String>,
}

#[derive(Deserialize)]
struct RawMessage {
    id: String,
    from: Option<String>,
    from_user_id: Option<String>,
    timestamp: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    text: Option<RawText>,
    interactive: Option<RawInteractive>,
    button: Option<RawButton>,
    context: Option<RawContext>,
}

#[derive(Deserialize)]
struct RawText {
    body: String,
}

#[derive(Deserialize)]
struct RawInteractive {
    #[serde(rename = "type")]
    kind: String,
    button_reply: Option<RawReply>,
    list_reply: Option<RawReply>,
}

#[derive(Deserialize)]
struct RawReply {
    id: String,
    title: String,
}

#[derive(Deserialize)]
struct RawButton {
    payload: Option<String>,
    text: Option<String>,
}

#[derive(Deserialize)]
struct RawContext {
    id: Option<String>,
}

#[derive(Deserialize)]
struct RawStatus {
    id: String,
    status: String,
    biz_opaque_callback_data: Option<String>,
    #[serde(default)]
    errors: Vec<RawError>,
}

#[derive(Deserialize)]
struct RawError {
    code: Option<i64>,
    title: Option<String>,
    message: Option<String>,
}

/// Parses a JSON body already known to be authentic. Message ids come out hashed by `key`
/// (see [`PrivacyKey`]): the raw wamid stays in the element's `raw` copy only.
pub fn parse_batch(body: &Value, key: &PrivacyKey) -> ParsedBatch {
    let mut batch = ParsedBatch::default();
    let Some(entries) = body.get("entry").and_then(Value::as_array) else {
        batch.errors.push("body has no entry[] array".to_owned());
        return batch;
    };
    for (e, entry) in entries.iter().enumerate() {
        let Some(changes) = entry.get("changes").and_then(Value::as_array) else {
            batch.errors.push(format!("entry[{e}] has no changes[] array"));
            continue;
        };
        for (c, change) in changes.iter().enumerate() {
            let at = format!("entry[{e}].changes[{c}]");
            if change.get("field").and_then(Value::as_str).is_some_and(|f| f != "messages") {
                continue; // other subscriptions (account updates, templates) are not ours
            }
            match parse_change(change.get("value"), &at, key, &mut batch.errors) {
                Some(parsed) => batch.changes.push(parsed),
                None => continue,
            }
        }
    }
    batch
}

fn parse_change(value: Option<&Value>, at: &str, key: &PrivacyKey, errors: &mut Vec<String>) -> Option<ParsedChange> {
    let Some(value) = value.filter(|v| v.is_object()) else {
        errors.push(format!("{at}: missing value object"));
        return None;
    };
    let Some(phone_number_id) = value.pointer("/metadata/phone_number_id").and_then(Value::as_str) else {
        errors.push(format!("{at}: missing value.metadata.phone_number_id"));
        return None;
    };
    let contacts: Vec<RawContact> = value
        .get("contacts")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|c| RawContact::deserialize(c).ok()).collect())
        .unwrap_or_default();

    let mut change = ParsedChange { phone_number_id: phone_number_id.to_owned(), ..Default::default() };
    for (i, element) in array(value, "messages").iter().enumerate() {
        match parse_message(element, &contacts, key) {
            Ok(message) => change.messages.push(message),
            Err(reason) => errors.push(format!("{at}.value.messages[{i}]: {reason}")),
        }
    }
    for (i, element) in array(value, "statuses").iter().enumerate() {
        match parse_status(element, key) {
            Ok(Some(status)) => change.statuses.push(status),
            Ok(None) => {}
            Err(reason) => errors.push(format!("{at}.value.statuses[{i}]: {reason}")),
        }
    }
    Some(change)
}

fn array<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn parse_message(element: &Value, contacts: &[RawContact], key: &PrivacyKey) -> Result<NewInbound, String> {
    let raw = RawMessage::deserialize(element).map_err(|e| e.to_string())?;
    if raw.id.trim().is_empty() {
        return Err("empty message id".to_owned());
    }
    let from = raw.from.as_deref().map(PhoneE164::parse).transpose().map_err(|e| e.to_string())?;
    let contact = contacts
        .iter()
        .find(|c| {
            from.as_ref().is_some_and(|f| c.wa_id.as_deref().map(|w| w.trim_start_matches('+')) == Some(f.digits()))
        })
        .or_else(|| contacts.iter().find(|c| raw.from_user_id.is_some() && c.user_id == raw.from_user_id))
        .or(if contacts.len() == 1 { contacts.first() } else { None });
    let wa_id = match from {
        Some(phone) => Some(phone),
        None => {
            contact.and_then(|c| c.wa_id.as_deref()).map(PhoneE164::parse).transpose().map_err(|e| e.to_string())?
        }
    };
    let identity = ContactIdentity {
        wa_id,
        user_id: raw.from_user_id.clone().or_else(|| contact.and_then(|c| c.user_id.clone())),
        username: contact.and_then(|c| c.profile.as_ref()).and_then(|p| p.username.clone()),
        profile_name: contact.and_then(|c| c.profile.as_ref()).and_then(|p| p.name.clone()),
    };
    if identity.external_key().is_none() {
        return Err("no sender: neither from/wa_id nor from_user_id/user_id".to_owned());
    }
    let content = match raw.kind.as_str() {
        "text" => InboundContent::Text { body: raw.text.ok_or("text message without text")?.body },
        "interactive" => {
            let interactive = raw.interactive.ok_or("interactive message without interactive")?;
            match interactive.kind.as_str() {
                "button_reply" => {
                    let r = interactive.button_reply.ok_or("button_reply without button_reply")?;
                    InboundContent::ButtonReply { id: r.id, title: r.title }
                }
                "list_reply" => {
                    let r = interactive.list_reply.ok_or("list_reply without list_reply")?;
                    InboundContent::ListReply { id: r.id, title: r.title }
                }
                other => InboundContent::Other { kind: format!("interactive:{other}") },
            }
        }
        "button" => {
            let b = raw.button.ok_or("button message without button")?;
            match (b.payload, b.text) {
                (None, None) => return Err("button message without payload or text".to_owned()),
                (payload, text) => InboundContent::QuickReply {
                    payload: payload.clone().or_else(|| text.clone()).unwrap_or_default(),
                    text: text.or(payload).unwrap_or_default(),
                },
            }
        }
        other => InboundContent::Other { kind: other.to_owned() },
    };
    let sent_at = raw
        .timestamp
        .as_deref()
        .and_then(|t| t.parse::<i64>().ok())
        .and_then(|secs| DateTime::<Utc>::from_timestamp(secs, 0));
    Ok(NewInbound {
        provider_message_id: key.message_id(&raw.id),
        contact: identity,
        content,
        context_id: raw.context.and_then(|c| c.id).map(|id| key.message_id(&id)),
        sent_at,
        raw: element.clone(),
        simulated_by: None,
    })
}

fn parse_status(element: &Value, key: &PrivacyKey) -> Result<Option<StatusUpdate>, String> {
    let raw = RawStatus::deserialize(element).map_err(|e| e.to_string())?;
    let status = match raw.status.as_str() {
        "sent" => DeliveryStatus::Sent,
        "delivered" => DeliveryStatus::Delivered,
        "read" | "played" => DeliveryStatus::Read,
        "failed" => DeliveryStatus::Failed,
        // Newer statuses (e.g. "deleted", "warning") carry nothing the outbox tracks.
        _ => return Ok(None),
    };
    let error = raw.errors.first().map(|e| {
        format!(
            "({}) {}",
            e.code.map(|c| c.to_string()).unwrap_or_else(|| "?".into()),
            e.message.as_deref().or(e.title.as_deref()).unwrap_or("unknown error")
        )
    });
    Ok(Some(StatusUpdate {
        provider_message_id: key.message_id(&raw.id),
        status,
        callback_key: raw.biz_opaque_callback_data,
        error,
    }))
}
