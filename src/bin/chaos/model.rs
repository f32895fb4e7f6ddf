//! A loopback Anthropic Messages API that plays a forgetful, repetitive model. The run tells it
//! what to do through commands in the customer's text (`#book service=1 … copies=2`); it answers
//! with that many identical or equivalent `tool_use` blocks, fresh ids on every call (a retried
//! turn repeats its calls with new ids), and ends the turn once it sees tool results.
//!
//! It also checks every request it gets the way the real API would refuse it: roles alternate
//! from `user`, every `tool_use` is answered by a `tool_result` in the next message and nothing
//! else is, ids are unique. A malformed history is a violation (and a 400, as the API answers).

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::faults::{Fault, Faults};
use crate::rng::Rng;

struct Inner {
    rng: Rng,
    next_id: u64,
    /// Share of calls answered with 429, 529 or 500.
    error_rate: f64,
    /// Malformed histories, by the business they came from (its name in the system prompt).
    violations: std::collections::HashMap<String, Vec<String>>,
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    faults: Faults,
}

#[derive(Clone)]
pub struct FakeModel {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeModel {
    pub async fn start(seed: u64, error_rate: f64, faults: Faults) -> anyhow::Result<Self> {
        let inner =
            Arc::new(Mutex::new(Inner { rng: Rng::new(seed), next_id: 0, error_rate, violations: Default::default() }));
        let app =
            axum::Router::new().route("/v1/messages", post(answer)).with_state(Shared { inner: inner.clone(), faults });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, inner })
    }

    /// Malformed histories sent for the business named `name`.
    pub fn take_violations(&self, name: &str) -> Vec<String> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).violations.remove(name).unwrap_or_default()
    }
}

fn error(status: u16, kind: &str) -> Response {
    let body = json!({ "type": "error", "error": { "type": kind, "message": "chaos" } });
    (StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), Json(body)).into_response()
}

async fn answer(State(shared): State<Shared>, Json(request): Json<Value>) -> Response {
    let mut inner = shared.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Err(problem) = check_history(&request["messages"]) {
        let system = request["system"].to_string();
        let business = system
            .split_once("Chaos run ")
            .map(|(_, rest)| format!("Chaos run {}", rest.chars().take_while(char::is_ascii_digit).collect::<String>()))
            .unwrap_or_default();
        inner.violations.entry(business).or_default().push(format!("malformed history sent to the model: {problem}"));
        return error(400, "invalid_request_error");
    }
    let error_rate = inner.error_rate;
    if inner.rng.chance(error_rate) {
        shared.faults.add(Fault::ModelError);
        let (status, kind) =
            *inner.rng.pick(&[(429, "rate_limit_error"), (529, "overloaded_error"), (500, "api_error")]);
        return error(status, kind);
    }
    let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
    let answered = blocks(&last).iter().any(|b| b["type"] == "tool_result");
    let calls = if answered { vec![] } else { command(&text_of(&last)) };
    if calls.is_empty() {
        return Json(json!({ "content": [{ "type": "text", "text": "Feito." }], "stop_reason": "end_turn",
                            "usage": { "input_tokens": 1, "output_tokens": 1 } }))
        .into_response();
    }
    if calls.len() > 1 {
        shared.faults.add(Fault::DuplicateToolUse);
    }
    let content: Vec<Value> = calls
        .into_iter()
        .map(|(name, input)| {
            inner.next_id += 1;
            json!({ "type": "tool_use", "id": format!("toolu_chaos{:010}", inner.next_id), "name": name, "input": input })
        })
        .collect();
    Json(json!({ "content": content, "stop_reason": "tool_use", "usage": { "input_tokens": 1, "output_tokens": 1 } }))
        .into_response()
}

fn blocks(message: &Value) -> Vec<Value> {
    match &message["content"] {
        Value::Array(blocks) => blocks.clone(),
        Value::String(text) => vec![json!({ "type": "text", "text": text })],
        _ => vec![],
    }
}

fn text_of(message: &Value) -> String {
    blocks(message).iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
}

/// The tool calls the last `#` command in `text` asks for.
fn command(text: &str) -> Vec<(&'static str, Value)> {
    let Some(line) = text.lines().rev().find(|l| l.trim_start().starts_with('#')) else { return vec![] };
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or_default();
    let args: std::collections::HashMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
    let arg = |k: &str| args.get(k).copied().unwrap_or_default();
    let id = |k: &str| arg(k).parse::<i64>().map(Value::from).unwrap_or(Value::Null);
    let copies = arg("copies").parse::<usize>().unwrap_or(1).clamp(1, 4);
    (0..copies)
        .filter_map(|n| match verb {
            // Copies alternate between two spellings of the same instant (near-duplicates).
            "#book" => Some((
                "create_booking",
                json!({ "service_id": id("service"), "professional_id": id("professional"),
                        "starts_at": if n % 2 == 0 { arg("at") } else { arg("alt") } }),
            )),
            "#move" => Some(("reschedule_booking", json!({ "booking_id": id("booking"), "starts_at": arg("at") }))),
            "#cancel" => Some(("cancel_booking", json!({ "booking_id": id("booking") }))),
            "#confirm" => Some(("confirm_action", json!({ "action_id": arg("action") }))),
            "#charge" => Some((
                "propose_charge",
                json!({ "customer_phone": arg("phone"), "amount": arg("amount"), "description": arg("desc"),
                        "payer_document": arg("doc") }),
            )),
            "#refund" => Some(("propose_refund", json!({ "charge_id": id("charge"), "amount": arg("amount") }))),
            _ => None,
        })
        .collect()
}

/// The request rules of the Messages API for a conversation with tools.
fn check_history(messages: &Value) -> Result<(), String> {
    let messages = messages.as_array().ok_or("no messages")?;
    let mut seen_ids = std::collections::HashSet::new();
    let mut open: Vec<String> = vec![];
    for (i, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err(format!("message {i} is {role:?}, expected {expected}"));
        }
        let blocks = blocks(message);
        let results: Vec<String> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str().map(str::to_owned))
            .collect();
        if role == "user" {
            let mut wanted = open.clone();
            let mut got = results.clone();
            wanted.sort();
            got.sort();
            if wanted != got {
                return Err(format!("message {i} answers {got:?}, open calls {wanted:?}"));
            }
            open.clear();
        } else {
            for b in blocks.iter().filter(|b| b["type"] == "tool_use") {
                let id = b["id"].as_str().unwrap_or_default().to_owned();
                if !seen_ids.insert(id.clone()) {
                    return Err(format!("tool_use id {id} repeated"));
                }
                open.push(id);
            }
        }
    }
    if !open.is_empty() {
        return Err(format!("unanswered calls {open:?} at the end"));
    }
    Ok(())
}
