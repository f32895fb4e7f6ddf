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

pub fn text(wamid: &str, from: &str, body: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": "1749416383", "type": "text", "text": { "body": body } })
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
