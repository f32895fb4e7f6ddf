//! Webhook bodies: Meta's documented payloads (tests/fixtures) and builders on their shape.

use serde_json::{Value, json};

pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/whatsapp/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("fixture json")
}

/// One change for `phone_number_id` holding `messages`, with a contact for `wa_id`.
pub fn envelope(phone_number_id: &str, wa_id: &str, messages: Vec<Value>) -> Value {
    json!({
        "object": "whatsapp_business_account",
        "entry": [{
            "id": "102290129340398",
            "changes": [{
                "field": "messages",
                "value": {
                    "messaging_product": "whatsapp",
                    "metadata": { "display_phone_number": "15550783881", "phone_number_id": phone_number_id },
                    "contacts": [{ "profile": { "name": "Sheena Nelson" }, "wa_id": wa_id }],
                    "messages": messages,
                }
            }]
        }]
    })
}

/// A text message sent now (its `timestamp` is the current second, as Meta stamps it).
pub fn text(wamid: &str, from: &str, body: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": now(), "type": "text", "text": { "body": body } })
}

/// Meta's `timestamp` of a message sent now: Unix seconds, as a string.
pub fn now() -> String {
    chrono::Utc::now().timestamp().to_string()
}

/// `envelope` with the contact's profile name.
pub fn envelope_named(phone_number_id: &str, wa_id: &str, name: &str, messages: Vec<Value>) -> Value {
    let mut body = envelope(phone_number_id, wa_id, messages);
    body["entry"][0]["changes"][0]["value"]["contacts"][0]["profile"]["name"] = json!(name);
    body
}

pub fn text_payload(wamid: &str, from: &str, body: &str) -> Value {
    envelope(super::common::PHONE_NUMBER_ID, from, vec![text(wamid, from, body)])
}

/// A `statuses[]` webhook for an outbound message.
pub fn status_payload(wamid: &str, status: &str, callback: Option<&str>) -> Value {
    let mut element =
        json!({ "id": wamid, "status": status, "timestamp": "1750030073", "recipient_id": "16505551234" });
    if let Some(key) = callback {
        element["biz_opaque_callback_data"] = json!(key);
    }
    json!({
        "object": "whatsapp_business_account",
        "entry": [{ "id": "102290129340398", "changes": [{ "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": { "display_phone_number": "15550783881", "phone_number_id": super::common::PHONE_NUMBER_ID },
            "statuses": [element]
        }}]}]
    })
}

pub fn bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("serialize")
}
