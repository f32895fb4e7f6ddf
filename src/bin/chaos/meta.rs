//! Meta's side of the webhooks: signed bodies delivered to a random server process and
//! retried until one answers 200, as Meta retries; duplicates and late redeliveries on demand.
//! Every acknowledged message id is remembered per phone number, for the invariants.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::rng::Rng;

pub const APP_SECRET: &str = "chaos-app-secret";
/// How long Meta keeps retrying here (it keeps going for days; a run cannot).
const GIVE_UP: Duration = Duration::from_secs(90);

pub struct Meta {
    pub cluster: Arc<Cluster>,
    http: reqwest::Client,
    rng: Mutex<Rng>,
    acked: Mutex<HashMap<String, Vec<String>>>,
}

impl Meta {
    pub fn new(cluster: Arc<Cluster>, seed: u64) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
        Ok(Self { cluster, http, rng: Mutex::new(Rng::new(seed)), acked: Mutex::default() })
    }

    fn random_process(&self) -> usize {
        self.rng.lock().unwrap_or_else(std::sync::PoisonError::into_inner).below(self.cluster.len() as u64) as usize
    }

    /// The base URL of a random server process.
    pub fn random_url(&self) -> String {
        self.cluster.url(self.random_process())
    }

    /// Delivers `body` until a server answers 200; false if none did within [`GIVE_UP`].
    pub async fn deliver(&self, body: &Value) -> bool {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let signature = balcao::whatsapp::signature::sign(APP_SECRET.as_bytes(), &bytes);
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        while start.elapsed() < GIVE_UP {
            let url = self.random_url();
            let sent = self
                .http
                .post(format!("{url}/webhooks/whatsapp"))
                .header("content-type", "application/json")
                .header("x-hub-signature-256", &signature)
                .body(bytes.clone())
                .send()
                .await;
            if sent.is_ok_and(|r| r.status() == 200) {
                self.remember(body);
                return true;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
        false
    }

    fn remember(&self, body: &Value) {
        let value = &body["entry"][0]["changes"][0]["value"];
        let (Some(number), Some(messages)) =
            (value["metadata"]["phone_number_id"].as_str(), value["messages"].as_array())
        else {
            return;
        };
        let mut acked = self.acked.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ids = acked.entry(number.to_owned()).or_default();
        ids.extend(messages.iter().filter_map(|m| m["id"].as_str().map(str::to_owned)));
    }

    /// The message ids acknowledged for `phone_number_id`, and forgets them.
    pub fn take_acked(&self, phone_number_id: &str) -> Vec<String> {
        self.acked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(phone_number_id).unwrap_or_default()
    }
}

/// A status change's envelope (the simulator builds only messages).
fn status_envelope(phone_number_id: &str, value: Value) -> Value {
    let mut value = value;
    value["messaging_product"] = json!("whatsapp");
    value["metadata"] = json!({ "display_phone_number": "15550783881", "phone_number_id": phone_number_id });
    json!({ "object": "whatsapp_business_account",
            "entry": [{ "id": "102290129340398", "changes": [{ "field": "messages", "value": value }] }] })
}

/// One inbound message from `from` (a `wa_id`, digits only), in the simulator's envelope.
pub fn message(phone_number_id: &str, from: &str, message: Value) -> Value {
    balcao::simulator::payload::envelope(phone_number_id, from, "Cliente", message)
}

/// Meta's `timestamp` of a message sent now (a redelivery resends the element, and its time).
fn sent_now() -> String {
    chrono::Utc::now().timestamp().to_string()
}

pub fn text(wamid: &str, from: &str, body: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": sent_now(), "type": "text", "text": { "body": body } })
}

pub fn button(wamid: &str, from: &str, id: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": sent_now(), "type": "interactive",
            "context": { "from": "15550783881", "id": "wamid.offer" },
            "interactive": { "type": "button_reply", "button_reply": { "id": id, "title": "Confirmar" } } })
}

/// A `sent` status for a message Meta accepted, echoing our key.
pub fn status(phone_number_id: &str, wamid: &str, recipient: &str, key: Option<&str>) -> Value {
    let mut element = json!({ "id": wamid, "status": "sent", "timestamp": "1764763200", "recipient_id": recipient });
    if let Some(key) = key {
        element["biz_opaque_callback_data"] = json!(key);
    }
    status_envelope(phone_number_id, json!({ "statuses": [element] }))
}
