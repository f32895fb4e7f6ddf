//! A loopback Graph API: records every send and answers as told (success, 429, 5xx, a Meta
//! error code, or a hang past the client's timeout after the request arrived).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub enum Reply {
    Accept,
    /// HTTP status and a Meta error code.
    Error(u16, i64),
    /// A bare status without a JSON body (a proxy's 502, say).
    Status(u16),
    /// Records the request, then never answers in time.
    Hang,
}

#[derive(Debug, Clone)]
pub struct Send {
    pub phone_number_id: String,
    pub authorization: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    sends: Vec<Send>,
    next_id: u64,
}

#[derive(Clone)]
pub struct FakeGraph {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeGraph {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new().route("/{phone_number_id}/messages", post(messages)).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake graph");
        let url = format!("http://{}/v25.0", listener.local_addr().expect("addr"));
        let app = axum::Router::new().nest("/v25.0", app);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner }
    }

    /// Queues replies for the next sends; once empty, sends are accepted.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.lock().expect("lock").script.extend(replies);
    }

    pub fn sends(&self) -> Vec<Send> {
        self.inner.lock().expect("lock").sends.clone()
    }
}

async fn messages(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(phone_number_id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (reply, id) = {
        let mut inner = inner.lock().expect("lock");
        inner.sends.push(Send {
            phone_number_id,
            authorization: headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned),
            body: body.clone(),
        });
        inner.next_id += 1;
        (inner.script.pop_front().unwrap_or(Reply::Accept), inner.next_id)
    };
    match reply {
        Reply::Accept => Json(json!({
            "messaging_product": "whatsapp",
            "contacts": [{ "input": body["to"], "wa_id": body["to"].as_str().map(|t| t.trim_start_matches('+')) }],
            "messages": [{ "id": format!("wamid.FAKE{id:06}") }],
        }))
        .into_response(),
        Reply::Error(status, code) => (
            StatusCode::from_u16(status).expect("status"),
            Json(json!({ "error": {
                "message": format!("(#{code}) simulated"),
                "type": "OAuthException",
                "code": code,
                "error_data": { "messaging_product": "whatsapp", "details": "simulated by the fake" },
                "fbtrace_id": "AFakeTrace",
            }})),
        )
            .into_response(),
        Reply::Status(status) => StatusCode::from_u16(status).expect("status").into_response(),
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            StatusCode::GATEWAY_TIMEOUT.into_response()
        }
    }
}
