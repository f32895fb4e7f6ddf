//! The Graph API request bodies.

use serde_json::{Value, json};

use super::validate::{MessageError, check_caption, check_present};
use super::*;

/// An image Meta already holds (uploaded through `POST /{phone_number_id}/media`), as the
/// message that shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedImage {
    pub media_id: String,
    pub caption: Option<String>,
}

impl UploadedImage {
    pub fn validate(&self) -> Result<(), MessageError> {
        check_present("media id", &self.media_id)?;
        check_caption(self.caption.as_deref())
    }

    /// The Graph API request body.
    pub fn to_graph_json(&self, to: &Recipient, callback_data: &str) -> Value {
        let mut v = envelope(to, callback_data);
        v["type"] = json!("image");
        let mut image = json!({ "id": self.media_id });
        if let Some(c) = &self.caption {
            image["caption"] = json!(c);
        }
        v["image"] = image;
        v
    }
}

impl OutboundMessage {
    /// The Graph API request body. A QR code has none of its own: see [`UploadedImage`].
    pub fn to_graph_json(&self, to: &Recipient, callback_data: &str) -> Result<Value, MessageError> {
        let mut v = envelope(to, callback_data);
        let footer = |f: &Option<String>| f.as_ref().map(|t| json!({ "text": t }));
        match self {
            Self::Text { body } => {
                v["type"] = json!("text");
                v["text"] = json!({ "preview_url": false, "body": body });
            }
            Self::Buttons { body, footer: f, buttons } => {
                v["type"] = json!("interactive");
                let mut interactive = json!({
                    "type": "button",
                    "body": { "text": body },
                    "action": { "buttons": buttons.iter().map(|b| json!({
                        "type": "reply", "reply": { "id": b.id, "title": b.title }
                    })).collect::<Vec<_>>() },
                });
                if let Some(f) = footer(f) {
                    interactive["footer"] = f;
                }
                v["interactive"] = interactive;
            }
            Self::List { body, footer: f, button, sections } => {
                v["type"] = json!("interactive");
                let sections: Vec<Value> = sections
                    .iter()
                    .map(|s| {
                        let rows: Vec<Value> = s
                            .rows
                            .iter()
                            .map(|r| {
                                let mut row = json!({ "id": r.id, "title": r.title });
                                if let Some(d) = &r.description {
                                    row["description"] = json!(d);
                                }
                                row
                            })
                            .collect();
                        let mut section = json!({ "rows": rows });
                        if let Some(t) = &s.title {
                            section["title"] = json!(t);
                        }
                        section
                    })
                    .collect();
                let mut interactive = json!({
                    "type": "list",
                    "body": { "text": body },
                    "action": { "button": button, "sections": sections },
                });
                if let Some(f) = footer(f) {
                    interactive["footer"] = f;
                }
                v["interactive"] = interactive;
            }
            Self::Template { name, language, body_params, quick_replies } => {
                let mut components = Vec::new();
                if !body_params.is_empty() {
                    let parameters: Vec<Value> =
                        body_params.iter().map(|p| json!({ "type": "text", "text": p })).collect();
                    components.push(json!({ "type": "body", "parameters": parameters }));
                }
                for (index, payload) in quick_replies.iter().enumerate() {
                    components.push(json!({
                        "type": "button",
                        "sub_type": "quick_reply",
                        // A string, as in Meta's examples.
                        "index": index.to_string(),
                        "parameters": [{ "type": "payload", "payload": payload }],
                    }));
                }
                let mut template = json!({ "name": name, "language": { "code": language } });
                if !components.is_empty() {
                    template["components"] = json!(components);
                }
                v["type"] = json!("template");
                v["template"] = template;
            }
            Self::QrImage { .. } => return Err(MessageError::NeedsUpload { kind: "qr_image" }),
            Self::Location { latitude, longitude, name, address } => {
                let mut location = json!({ "latitude": latitude, "longitude": longitude });
                if let Some(name) = name {
                    location["name"] = json!(name);
                }
                if let Some(address) = address {
                    location["address"] = json!(address);
                }
                v["type"] = json!("location");
                v["location"] = location;
            }
            Self::OrderDetails {
                reference_id,
                body,
                footer: f,
                amount,
                description,
                copia_e_cola,
                merchant_name,
                pix_key,
                key_type,
                fallback: _,
            } => {
                let money = json!({ "value": amount.0, "offset": AMOUNT_OFFSET });
                let mut interactive = json!({
                    "type": "order_details",
                    "body": { "text": body },
                    "action": {
                        "name": "review_and_pay",
                        "parameters": {
                            "reference_id": reference_id,
                            // A service: nothing ships, so no address is asked for.
                            "type": "digital-goods",
                            "payment_type": "br",
                            "currency": "BRL",
                            "total_amount": money,
                            "payment_settings": [{
                                "type": "pix_dynamic_code",
                                "pix_dynamic_code": {
                                    "code": copia_e_cola,
                                    "merchant_name": merchant_name,
                                    "key": pix_key,
                                    "key_type": key_type,
                                },
                            }],
                            "order": {
                                "status": "pending",
                                "items": [{
                                    "retailer_id": reference_id,
                                    "name": description,
                                    "amount": money,
                                    "quantity": 1,
                                }],
                                "subtotal": money,
                            },
                        },
                    },
                });
                if let Some(f) = footer(f) {
                    interactive["footer"] = f;
                }
                v["type"] = json!("interactive");
                v["interactive"] = interactive;
            }
            Self::OrderStatus { reference_id, status, body } => {
                v["type"] = json!("interactive");
                v["interactive"] = json!({
                    "type": "order_status",
                    "body": { "text": body },
                    "action": {
                        "name": "review_order",
                        "parameters": { "reference_id": reference_id, "order": { "status": status } },
                    },
                });
            }
        }
        Ok(v)
    }
}

/// The fields every `POST /messages` body starts with.
fn envelope(to: &Recipient, callback_data: &str) -> Value {
    let mut v = json!({ "messaging_product": "whatsapp", "recipient_type": "individual" });
    match (&to.wa_id, &to.user_id) {
        (Some(phone), _) => v["to"] = json!(phone.as_str()),
        (None, Some(user)) => v["recipient"] = json!(user),
        (None, None) => {}
    }
    v["biz_opaque_callback_data"] = json!(callback_data);
    v
}
