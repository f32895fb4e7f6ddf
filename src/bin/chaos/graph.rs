//! A loopback Graph API that keeps every message it accepted, per phone number, and acts as
//! Meta does around a send: faults queued by the runs (429, 5xx, or an accepted message whose
//! response never arrives), and a `sent` status webhook, echoing our key, for every accepted
//! message (the outbox needs it to resolve a send whose response was lost).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Longer than the servers' HTTP timeout: the response is lost.
const LOST: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy)]
pub enum GraphFault {
    /// This status with Meta's error envelope; nothing is sent.
    Error(u16),
    /// Accepted, and the response never comes in time.
    Lost,
}

/// A message Meta accepted.
#[derive(Debug, Clone)]
pub struct Sent {
    pub to: String,
    pub key: Option<String>,
    pub body: Value,
}

impl Sent {
    /// The text a customer reads (a text's body, an interactive message's body).
    pub fn text(&self) -> &str {
        self.body["text"]["body"].as_str().or_else(|| self.body["interactive"]["body"]["text"].as_str()).unwrap_or("")
    }

    /// The ids of its reply buttons.
    pub fn buttons(&self) -> Vec<String> {
        self.body["interactive"]["action"]["buttons"]
            .as_array()
            .map(|b| b.iter().filter_map(|b| b["reply"]["id"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }
}

/// What Meta reports back for an accepted message: phone number id, wamid, recipient, key.
pub type StatusNote = (String, String, String, Option<String>);

#[derive(Default)]
struct Inner {
    sent: HashMap<String, Vec<Sent>>,
    next: u64,
    faults: HashMap<String, VecDeque<GraphFault>>,
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    statuses: mpsc::UnboundedSender<StatusNote>,
}

#[derive(Clone)]
pub struct FakeGraph {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeGraph {
    pub async fn start() -> anyhow::Result<(Self, mpsc::UnboundedReceiver<StatusNote>)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .route("/v25.0/{phone_number_id}/messages", post(messages))
            .route("/v25.0/{phone_number_id}/media", post(media))
            .with_state(Shared { inner: inner.clone(), statuses: tx });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/v25.0", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok((Self { url, inner }, rx))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next sends from `phone_number_id` meet these faults.
    pub fn inject(&self, phone_number_id: &str, faults: impl IntoIterator<Item = GraphFault>) {
        self.lock().faults.entry(phone_number_id.to_owned()).or_default().extend(faults);
    }

    pub fn sent(&self, phone_number_id: &str) -> Vec<Sent> {
        self.lock().sent.get(phone_number_id).cloned().unwrap_or_default()
    }

    pub fn forget(&self, phone_number_id: &str) {
        let mut inner = self.lock();
        inner.sent.remove(phone_number_id);
        inner.faults.remove(phone_number_id);
    }

    /// Waits up to `timeout` for the first message to `to`, after the first `skip` ones, that
    /// `wanted` accepts.
    pub async fn wait_for(
        &self,
        phone_number_id: &str,
        to: &str,
        skip: usize,
        timeout: Duration,
        wanted: impl Fn(&Sent) -> bool,
    ) -> Option<Sent> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found = self.sent(phone_number_id).into_iter().filter(|s| s.to == to).skip(skip).find(|s| wanted(s));
            if found.is_some() {
                return found;
            }
            if tokio::time::Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How many messages `to` has received.
    pub fn count_to(&self, phone_number_id: &str, to: &str) -> usize {
        self.lock().sent.get(phone_number_id).map_or(0, |s| s.iter().filter(|s| s.to == to).count())
    }
}

async fn messages(
    State(shared): State<Shared>,
    Path(phone_number_id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let to = body["to"].as_str().unwrap_or_default().trim_start_matches('+').to_owned();
    let key = body["biz_opaque_callback_data"].as_str().map(str::to_owned);
    let (fault, wamid) = {
        let mut inner = shared.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let fault = inner.faults.get_mut(&phone_number_id).and_then(VecDeque::pop_front);
        if let Some(GraphFault::Error(status)) = fault {
            drop(inner);
            let code = if status == 429 { 130_429 } else { 1 };
            let error = json!({ "error": { "message": "(#simulated) chaos", "type": "OAuthException",
                                           "code": code, "fbtrace_id": "AChaos" } });
            return (StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), Json(error)).into_response();
        }
        inner.next += 1;
        let wamid = format!("wamid.CHAOS{:08}", inner.next);
        inner.sent.entry(phone_number_id.clone()).or_default().push(Sent { to: to.clone(), key: key.clone(), body });
        (fault, wamid)
    };
    let _ = shared.statuses.send((phone_number_id, wamid.clone(), to.clone(), key));
    if matches!(fault, Some(GraphFault::Lost)) {
        tokio::time::sleep(LOST).await;
        return StatusCode::GATEWAY_TIMEOUT.into_response();
    }
    Json(json!({ "messaging_product": "whatsapp", "contacts": [{ "input": to, "wa_id": to }],
                 "messages": [{ "id": wamid }] }))
    .into_response()
}

async fn media(State(shared): State<Shared>) -> Response {
    let n = {
        let mut inner = shared.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.next += 1;
        inner.next
    };
    Json(json!({ "id": format!("media.CHAOS{n:08}") })).into_response()
}
