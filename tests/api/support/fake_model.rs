//! A loopback model server that speaks the Anthropic Messages and OpenAI chat completions wire
//! formats: it answers from a script, records every request, and can delay or fail on demand.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: Value,
    pub delay: Duration,
}

pub fn ok(body: Value) -> Reply {
    Reply {
        status: 200,
        headers: vec![("request-id", "req_test"), ("x-request-id", "req_oa")],
        body,
        delay: Duration::ZERO,
    }
}

pub fn status(status: u16, body: Value) -> Reply {
    Reply { status, headers: vec![], body, delay: Duration::ZERO }
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    requests: Vec<(HeaderMap, Value)>,
}

#[derive(Clone)]
pub struct FakeModel {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

async fn answer(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap, body: Bytes) -> Response {
    let reply = {
        let mut inner = inner.lock().unwrap();
        inner.requests.push((headers, serde_json::from_slice(&body).unwrap_or(Value::Null)));
        inner.script.pop_front().expect("the test scripted no more replies")
    };
    tokio::time::sleep(reply.delay).await;
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), axum::Json(reply.body)).into_response();
    for (k, v) in reply.headers {
        response.headers_mut().insert(k, v.parse().unwrap());
    }
    response
}

impl FakeModel {
    pub async fn start(script: Vec<Reply>) -> Self {
        let inner = Arc::new(Mutex::new(Inner { script: script.into(), requests: vec![] }));
        let app = axum::Router::new()
            .route("/v1/messages", post(answer))
            .route("/v1/chat/completions", post(answer))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, inner }
    }
    pub fn push(&self, reply: Reply) {
        self.inner.lock().unwrap().script.push_back(reply);
    }

    pub fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.inner.lock().unwrap().requests.clone()
    }
}

/// An Anthropic response asking for these tool calls.
pub fn tool_use(calls: &[(&str, &str, Value)]) -> Reply {
    let content: Vec<Value> = calls
        .iter()
        .map(|(id, name, input)| json!({ "type": "tool_use", "id": id, "name": name, "input": input }))
        .collect();
    ok(json!({ "content": content, "stop_reason": "tool_use", "usage": { "input_tokens": 1, "output_tokens": 1 } }))
}

/// An Anthropic response that ends the turn with `text`.
pub fn says(text: &str) -> Reply {
    ok(json!({ "content": [{ "type": "text", "text": text }], "stop_reason": "end_turn", "usage": {} }))
}
