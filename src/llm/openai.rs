//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`): OpenAI, Ollama, vLLM,
//! OpenRouter. Function tools; `parallel_tool_calls: false` unless configured off for models
//! that reject it; `arguments` arrive as a JSON string and are parsed here (a string that does
//! not parse becomes an input error for the model, never a guess).

use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::retry::{Attempt, retry_after, transient_status, transport_error};
use super::{Block, ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, RetryPolicy, Role, StopReason};
use crate::domain::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// OpenAI's "you have no credit left": no retry can fix it.
const QUOTA_CODE: &str = "insufficient_quota";

pub struct OpenAiClient {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<Secret>,
    model: String,
    /// Some models (o-series) reject the parameter outright.
    send_parallel_flag: bool,
    retry: RetryPolicy,
}

impl OpenAiClient {
    pub fn new(
        base_url: &str,
        api_key: Option<Secret>,
        model: &str,
        send_parallel_flag: bool,
        timeout: Duration,
        retry: RetryPolicy,
    ) -> reqwest::Result<Self> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(Duration::from_secs(5)).build()?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model: model.to_owned(),
            send_parallel_flag,
            retry,
        })
    }

    pub fn body(&self, request: &ModelRequest) -> Value {
        let mut system = request.system_static.clone();
        if !request.system_dynamic.is_empty() {
            system.push_str("\n\n");
            system.push_str(&request.system_dynamic);
        }
        let mut messages = vec![json!({ "role": "system", "content": system })];
        for m in &request.messages {
            messages.extend(message_json(m));
        }
        let mut body = json!({ "model": self.model, "messages": messages });
        // OpenAI's newer models accept only `max_completion_tokens`; other servers (Ollama,
        // vLLM, older proxies) know `max_tokens`.
        let field = if self.base_url.contains("api.openai.com") { "max_completion_tokens" } else { "max_tokens" };
        body[field] = json!(request.max_tokens);
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.input_schema } }))
                .collect();
            body["tool_choice"] = json!("auto");
            if request.single_tool_call && self.send_parallel_flag {
                body["parallel_tool_calls"] = json!(false);
            }
        }
        body
    }

    async fn attempt(&self, body: &Value) -> Attempt<ModelResponse> {
        let mut post = self.http.post(format!("{}/chat/completions", self.base_url)).json(body);
        if let Some(key) = &self.api_key {
            post = post.bearer_auth(key.expose());
        }
        let response = match post.send().await {
            Ok(r) => r,
            Err(e) => return Attempt::Retry { message: transport_error(&e), after: None },
        };
        let status = response.status();
        let request_id = response.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let after = retry_after(response.headers());
        let text = match response.text().await {
            Ok(t) => t,
            Err(e) => return Attempt::Retry { message: transport_error(&e), after: None },
        };
        if status.is_success() {
            return match parse(&text, request_id) {
                Ok(r) => Attempt::Done(r),
                Err(e) => Attempt::Fail(e),
            };
        }
        let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let code = error.pointer("/error/code").and_then(Value::as_str);
        let message = format!(
            "HTTP {status} {}: {} (x-request-id {})",
            code.unwrap_or("?"),
            error.pointer("/error/message").and_then(Value::as_str).unwrap_or(&text),
            request_id.as_deref().unwrap_or("-"),
        );
        match status {
            StatusCode::TOO_MANY_REQUESTS if code == Some(QUOTA_CODE) => {
                Attempt::Fail(ModelError::SpendLimit { message })
            }
            StatusCode::TOO_MANY_REQUESTS => Attempt::Retry { message, after },
            s if transient_status(s) => Attempt::Retry { message, after },
            s => Attempt::Fail(ModelError::Rejected { status: s.as_u16(), message }),
        }
    }
}

fn message_json(m: &ChatMessage) -> Vec<Value> {
    if m.role == Role::Assistant
        && let Some(raw) = &m.raw
    {
        return vec![raw.clone()];
    }
    let mut out = Vec::new();
    if m.role == Role::Assistant {
        let text: Vec<&str> = m
            .blocks
            .iter()
            .filter_map(|b| if let Block::Text { text } = b { Some(text.as_str()) } else { None })
            .collect();
        let calls: Vec<Value> = m
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, input, .. } => Some(json!({
                    "id": id, "type": "function", "function": { "name": name, "arguments": input.to_string() }
                })),
                _ => None,
            })
            .collect();
        let mut v = json!({ "role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text.join("\n")) } });
        if !calls.is_empty() {
            v["tool_calls"] = json!(calls);
        }
        return vec![v];
    }
    // Tool answers first (one message each, right after the assistant's calls), then the text.
    for b in &m.blocks {
        if let Block::ToolResult { tool_use_id, content, is_error } = b {
            let content = if *is_error { format!("Error: {content}") } else { content.clone() };
            out.push(json!({ "role": "tool", "tool_call_id": tool_use_id, "content": content }));
        }
    }
    let text: Vec<&str> =
        m.blocks.iter().filter_map(|b| if let Block::Text { text } = b { Some(text.as_str()) } else { None }).collect();
    if !text.is_empty() {
        out.push(json!({ "role": "user", "content": text.join("\n") }));
    }
    out
}

/// Reads a `2xx` answer of the OpenAI Chat Completions as the client does: its blocks (each tool
/// call with its input, or why the input is unusable), stop reason, usage and the raw message
/// kept for history. Public for the fuzz targets; never panics.
pub fn parse(text: &str, request_id: Option<String>) -> Result<ModelResponse, ModelError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ModelError::Malformed(e.to_string()))?;
    let choice = v.pointer("/choices/0").ok_or_else(|| ModelError::Malformed("no choices".into()))?;
    let message = choice.get("message").cloned().ok_or_else(|| ModelError::Malformed("no message".into()))?;
    let mut blocks = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        blocks.push(Block::Text { text: text.to_owned() });
    }
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let raw_args = call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("");
        let (input, input_error) =
            match serde_json::from_str::<Value>(if raw_args.trim().is_empty() { "{}" } else { raw_args }) {
                Ok(v) if v.is_object() => (v, None),
                Ok(v) => (v, Some("the arguments are not a JSON object".to_owned())),
                Err(e) => (Value::String(raw_args.to_owned()), Some(format!("the arguments are not valid JSON: {e}"))),
            };
        blocks.push(Block::ToolUse {
            id: call.get("id").and_then(Value::as_str).unwrap_or_default().to_owned(),
            name: call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
            input,
            input_error,
        });
    }
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal,
        other => {
            tracing::info!(finish_reason = ?other, "unknown finish reason");
            StopReason::Other(other.unwrap_or("none").to_owned())
        }
    };
    Ok(ModelResponse {
        blocks,
        stop,
        raw: message,
        request_id,
        input_tokens: v.pointer("/usage/prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: v.pointer("/usage/completion_tokens").and_then(Value::as_u64).unwrap_or(0),
    })
}

#[async_trait]
impl ModelClient for OpenAiClient {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let body = self.body(request);
        self.retry.run(|| self.attempt(&body)).await
    }
}
