//! The webhook payload Meta sends for a customer's message: a text, a reply-button or list-row
//! tap (`interactive`), or a template's quick reply (`type: button`), wrapped in the
//! `whatsapp_business_account` envelope with the customer's profile name.
//!
//! Shapes follow Meta's documented webhook payloads (the fixtures under `tests/fixtures`):
//! a tap carries `context` naming the message it answers, as WhatsApp's clients send it.

use serde_json::{Value, json};

/// What the simulated customer sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Text(String),
    Reply(Reply),
    /// A voice note: the clip the repository ships ([`VOICE_NOTE`]), under [`VOICE_NOTE_MEDIA_ID`].
    VoiceNote,
}

/// The media id of the simulator's voice note. It names no Graph media: a simulated message's
/// audio is read from [`VOICE_NOTE`], never downloaded.
pub const VOICE_NOTE_MEDIA_ID: &str = "simulator.voice.note";
/// The voice note the simulators send: a short MP3 clip (`assets/voice-note.mp3`).
pub const VOICE_NOTE: &[u8] = include_bytes!("../../assets/voice-note.mp3");
pub const VOICE_NOTE_MIME: &str = "audio/mpeg";

/// A tap on something the bot sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub kind: ReplyKind,
    pub id: String,
    pub title: String,
    /// The wamid of the message tapped (`context.id`), when known.
    pub context: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyKind {
    /// `interactive.button_reply`
    Button,
    /// `interactive.list_reply`
    List,
    /// A template's quick reply: `type: button` with `button.payload` and `button.text`.
    QuickReply,
}

/// The display number the simulators put in `metadata` and `context.from`.
pub const DISPLAY_NUMBER: &str = "simulator";

/// The `messages[]` element for `content` from `wa_id` (digits, no `+`).
pub fn message(wa_id: &str, wamid: &str, timestamp: i64, content: &Content) -> Value {
    let mut m = json!({ "from": wa_id, "id": wamid, "timestamp": timestamp.to_string() });
    match content {
        Content::Text(body) => {
            m["type"] = json!("text");
            m["text"] = json!({ "body": body });
        }
        Content::VoiceNote => {
            m["type"] = json!("audio");
            m["audio"] = json!({ "id": VOICE_NOTE_MEDIA_ID, "mime_type": VOICE_NOTE_MIME, "voice": true });
        }
        Content::Reply(reply) => {
            let tapped = |kind: &str| json!({ "type": kind, kind: { "id": reply.id, "title": reply.title } });
            match reply.kind {
                ReplyKind::Button => {
                    m["type"] = json!("interactive");
                    m["interactive"] = tapped("button_reply");
                }
                ReplyKind::List => {
                    m["type"] = json!("interactive");
                    m["interactive"] = tapped("list_reply");
                }
                ReplyKind::QuickReply => {
                    m["type"] = json!("button");
                    m["button"] = json!({ "payload": reply.id, "text": reply.title });
                }
            }
            if let Some(context) = &reply.context {
                m["context"] = json!({ "from": DISPLAY_NUMBER, "id": context });
            }
        }
    }
    m
}

/// The whole webhook body: one change carrying `message` from `wa_id`, known as `name`, to the
/// tenant's `phone_number_id`.
pub fn envelope(phone_number_id: &str, wa_id: &str, name: &str, message: Value) -> Value {
    json!({
        "object": "whatsapp_business_account",
        "entry": [{ "id": "simulator", "changes": [{ "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": DISPLAY_NUMBER, "phone_number_id": phone_number_id },
            "contacts": [{ "profile": { "name": name }, "wa_id": wa_id }],
            "messages": [message]
        }}]}]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_tap_names_the_row_and_the_message_it_answers() {
        let reply = Reply {
            kind: ReplyKind::List,
            id: "g:svc:1".into(),
            title: "Corte".into(),
            context: Some("wamid.menu".into()),
        };
        let m = message("5511988880000", "wamid.x", 1_750_091_045, &Content::Reply(reply));
        assert_eq!(
            m,
            json!({ "from": "5511988880000", "id": "wamid.x", "timestamp": "1750091045", "type": "interactive",
                    "interactive": { "type": "list_reply", "list_reply": { "id": "g:svc:1", "title": "Corte" } },
                    "context": { "from": DISPLAY_NUMBER, "id": "wamid.menu" } })
        );
    }

    #[test]
    fn the_envelope_parses_as_a_webhook() {
        let m = message("5511988880000", "wamid.t", 1, &Content::Text("oi <b>".into()));
        let body = envelope("106540352242922", "5511988880000", "Ana", m);
        let key = crate::domain::PrivacyKey::derive(&crate::domain::Secret::new("test"));
        let parsed = crate::whatsapp::webhook::parse_batch(&body, &key);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        assert_eq!(parsed.changes.len(), 1);
        assert_eq!(parsed.changes[0].messages.len(), 1);
    }
}
