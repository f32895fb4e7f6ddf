//! Meta's webhook payloads, parsed element by element.
//!
//! A batch is `entry[] × changes[] × messages[]/statuses[]`. Each element is deserialized on
//! its own, so one that fails is reported and its siblings still come through. Every identity
//! field is optional (business-scoped user ids, 2026), and message types are an open set: every
//! kind Meta documents is parsed (`InboundContent`, in [`message`]), anything else is kept with its type name
//! and error code. A message Meta could not deliver (an `interactive` without its object, its
//! `errors[]` on the element or beside `messages[]`) is kept too, never dropped.

use serde::Deserialize;
use serde_json::Value;

mod message;

use message::{RawContact, parse_message};

use crate::domain::PrivacyKey;
use crate::whatsapp::NewInbound;

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
struct RawStatus {
    id: String,
    status: String,
    biz_opaque_callback_data: Option<String>,
    #[serde(default)]
    errors: Vec<RawError>,
}

#[derive(Deserialize)]
pub(super) struct RawError {
    pub(super) code: Option<i64>,
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

    // Errors beside `messages[]` belong to them (an interactive Meta could not render).
    let change_error = array(value, "errors").iter().find_map(|e| e.get("code").and_then(Value::as_i64));
    let mut change = ParsedChange { phone_number_id: phone_number_id.to_owned(), ..Default::default() };
    for (i, element) in array(value, "messages").iter().enumerate() {
        match parse_message(element, &contacts, change_error, key) {
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
