//! One `messages[]` element, by its `type`: every kind Meta documents becomes an
//! [`InboundContent`], anything else is kept with its type name and error code.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::RawError;
use crate::domain::{PhoneE164, PrivacyKey};
use crate::whatsapp::{ContactIdentity, InboundContent, MediaKind, NewInbound};

#[derive(Deserialize)]
pub(super) struct RawContact {
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
    reaction: Option<RawReaction>,
    edit: Option<RawEdit>,
    revoke: Option<RawRevoke>,
    system: Option<RawSystem>,
    audio: Option<RawAudio>,
    location: Option<RawLocation>,
    #[serde(default)]
    errors: Vec<RawError>,
}

#[derive(Deserialize)]
struct RawReaction {
    message_id: String,
    emoji: Option<String>,
}

#[derive(Deserialize)]
struct RawEdit {
    original_message_id: String,
    message: Option<Value>,
}

#[derive(Deserialize)]
struct RawRevoke {
    original_message_id: String,
}

#[derive(Deserialize)]
struct RawSystem {
    #[serde(rename = "type")]
    kind: Option<String>,
    /// The new number: `wa_id` since webhook v12, `new_wa_id` before.
    wa_id: Option<String>,
    new_wa_id: Option<String>,
}

#[derive(Deserialize)]
struct RawAudio {
    id: String,
}

#[derive(Deserialize)]
struct RawLocation {
    name: Option<String>,
    address: Option<String>,
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

/// System notices that move a contact to a new number.
const NUMBER_CHANGED: &[&str] = &["user_changed_number", "customer_changed_number"];

pub(super) fn parse_message(
    element: &Value,
    contacts: &[RawContact],
    change_error: Option<i64>,
    key: &PrivacyKey,
) -> Result<NewInbound, String> {
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
    let error_code = raw.errors.iter().find_map(|e| e.code).or(change_error);
    let content = content(&raw, element, error_code, key)?;
    let context_id = match content.refers_to() {
        Some(id) => Some(id.to_owned()),
        None => raw.context.and_then(|c| c.id).map(|id| key.message_id(&id)),
    };
    let sent_at = raw
        .timestamp
        .as_deref()
        .and_then(|t| t.parse::<i64>().ok())
        .and_then(|secs| DateTime::<Utc>::from_timestamp(secs, 0));
    let sender_hashes =
        key.identities(identity.wa_id.as_ref(), identity.user_id.as_deref(), identity.username.as_deref());
    Ok(NewInbound {
        provider_message_id: key.message_id(&raw.id),
        contact: identity,
        content,
        context_id,
        sent_at,
        raw: element.clone(),
        simulated_by: None,
        sender_hashes,
    })
}

/// What the element says, by its `type`. Ids of other messages come out hashed, like the
/// element's own.
fn content(
    raw: &RawMessage,
    element: &Value,
    error_code: Option<i64>,
    key: &PrivacyKey,
) -> Result<InboundContent, String> {
    let unsupported = |kind: &str| InboundContent::Unsupported { kind: kind.to_owned(), error_code };
    Ok(match raw.kind.as_str() {
        "text" => InboundContent::Text { body: raw.text.as_ref().ok_or("text message without text")?.body.clone() },
        "interactive" => match &raw.interactive {
            Some(interactive) => match interactive.kind.as_str() {
                "button_reply" => {
                    let r = interactive.button_reply.as_ref().ok_or("button_reply without button_reply")?;
                    InboundContent::ButtonReply { id: r.id.clone(), title: r.title.clone() }
                }
                "list_reply" => {
                    let r = interactive.list_reply.as_ref().ok_or("list_reply without list_reply")?;
                    InboundContent::ListReply { id: r.id.clone(), title: r.title.clone() }
                }
                other => unsupported(&format!("interactive:{other}")),
            },
            // Meta could not render it (131000): kept with the error, answered as unreadable.
            None => unsupported("interactive"),
        },
        "button" => {
            let b = raw.button.as_ref().ok_or("button message without button")?;
            match (b.payload.clone(), b.text.clone()) {
                (None, None) => return Err("button message without payload or text".to_owned()),
                (payload, text) => InboundContent::QuickReply {
                    payload: payload.clone().or_else(|| text.clone()).unwrap_or_default(),
                    text: text.or(payload).unwrap_or_default(),
                },
            }
        }
        "reaction" => {
            let r = raw.reaction.as_ref().ok_or("reaction message without reaction")?;
            InboundContent::Reaction {
                to: key.message_id(&r.message_id),
                emoji: r.emoji.clone().filter(|e| !e.is_empty()),
            }
        }
        "edit" => {
            let e = raw.edit.as_ref().ok_or("edit message without edit")?;
            let message = e.message.as_ref();
            let body = message
                .and_then(|m| m.pointer("/text/body").or_else(|| caption(m, m.get("type")?.as_str()?)))
                .and_then(Value::as_str)
                .map(str::to_owned);
            InboundContent::Edit { of: key.message_id(&e.original_message_id), body }
        }
        "revoke" => {
            let r = raw.revoke.as_ref().ok_or("revoke message without revoke")?;
            InboundContent::Revoke { of: key.message_id(&r.original_message_id) }
        }
        "system" => {
            let system = raw.system.as_ref().ok_or("system message without system")?;
            let number = system.wa_id.as_deref().or(system.new_wa_id.as_deref());
            match (system.kind.as_deref(), number) {
                (Some(kind), Some(number)) if NUMBER_CHANGED.contains(&kind) => {
                    InboundContent::NumberChange { number: PhoneE164::parse(number).map_err(|e| e.to_string())? }
                }
                // Identity and user id changes: kept, nothing to act on.
                _ => unsupported("system"),
            }
        }
        "request_welcome" => InboundContent::Welcome,
        "audio" => {
            InboundContent::Audio { media_id: raw.audio.as_ref().ok_or("audio message without audio")?.id.clone() }
        }
        "location" => {
            let l = raw.location.as_ref().ok_or("location message without location")?;
            let label = [l.name.as_deref(), l.address.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(", ");
            InboundContent::Media { kind: MediaKind::Location, label: Some(label).filter(|l| !l.is_empty()) }
        }
        "contacts" => {
            let label = element.pointer("/contacts/0/name/formatted_name").and_then(Value::as_str).map(str::to_owned);
            InboundContent::Media { kind: MediaKind::Contacts, label }
        }
        other => match MediaKind::parse(other) {
            Some(kind) => InboundContent::Media {
                kind,
                label: caption(element, other).and_then(Value::as_str).map(str::to_owned),
            },
            None => unsupported(other),
        },
    })
}

/// A media object's caption (a document without one: its file name).
fn caption<'a>(message: &'a Value, kind: &str) -> Option<&'a Value> {
    let media = message.get(kind)?;
    media.get("caption").or_else(|| media.get("filename"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::Secret;
    use crate::whatsapp::webhook::parse_batch;

    fn parse_one(message: Value) -> NewInbound {
        let body = json!({ "entry": [{ "changes": [{ "field": "messages", "value": {
            "metadata": { "phone_number_id": "1" }, "messages": [message] } }] }] });
        let key = PrivacyKey::derive(&Secret::new("test"));
        let mut batch = parse_batch(&body, &key);
        assert!(batch.errors.is_empty(), "{:?}", batch.errors);
        batch.changes.remove(0).messages.remove(0)
    }

    #[test]
    fn a_caption_edit_carries_the_new_caption_and_its_original() {
        // Meta's edit page (coexistence numbers): the new message in full, here an image.
        let m = parse_one(json!({ "from": "16505551234", "id": "wamid.e", "timestamp": "1749854575", "type": "edit",
            "edit": { "original_message_id": "wamid.orig", "message": { "context": { "id": "M0" }, "type": "image",
                "image": { "caption": "Updated image caption", "mime_type": "image/jpeg", "id": "1234567890" } } } }));
        let key = PrivacyKey::derive(&Secret::new("test"));
        assert_eq!(
            m.content,
            InboundContent::Edit { of: key.message_id("wamid.orig"), body: Some("Updated image caption".into()) }
        );
        assert_eq!(m.context_id, Some(key.message_id("wamid.orig")), "stored as what it refers to");
    }

    #[test]
    fn errors_on_the_element_are_kept_with_it() {
        let m = parse_one(json!({ "from": "16505551234", "id": "wamid.u", "timestamp": "1", "type": "unknown",
            "errors": [{ "code": 131051, "details": "Message type is not currently supported",
                         "title": "Unsupported message type" }] }));
        assert_eq!(m.content, InboundContent::Unsupported { kind: "unknown".into(), error_code: Some(131051) });
        let m = parse_one(json!({ "from": "16505551234", "id": "wamid.i", "timestamp": "1", "type": "interactive",
            "errors": [{ "code": 131000, "title": "Something went wrong" }] }));
        assert_eq!(m.content, InboundContent::Unsupported { kind: "interactive".into(), error_code: Some(131000) });
    }

    #[test]
    fn a_removed_reaction_has_no_emoji_whether_omitted_or_empty() {
        for reaction in [json!({ "message_id": "wamid.x" }), json!({ "message_id": "wamid.x", "emoji": "" })] {
            let m = parse_one(
                json!({ "from": "16505551234", "id": "wamid.r", "timestamp": "1", "type": "reaction", "reaction": reaction }),
            );
            assert!(matches!(m.content, InboundContent::Reaction { emoji: None, .. }), "{:?}", m.content);
            assert_eq!(m.content.body(), None);
        }
    }
}
