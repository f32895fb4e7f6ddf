//! Anthropic Messages API (`POST {base}/v1/messages`, `anthropic-version: 2023-06-01`,
//! non-streaming). The static system block carries a cache breakpoint, so tools and static
//! instructions are cached across turns; the per-turn block follows it.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::retry::{Attempt, retry_after, transient_status, transport_error};
use super::{Block, ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, RetryPolicy, Role, StopReason};
use crate::domain::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Override with `ANTHROPIC_MODEL`; take real ids from the provider's model list.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const API_VERSION: &str = "2023-06-01";
/// The error code of a 429 that no retry can fix (the organization's spend cap).
const SPEND_LIMIT_CODE: &str = "enforced_spend_limit_reached";

pub struct AnthropicClient {
    http: reqwest::Client,
    base_url: String,
    api_key: Secret,
    model: String,
    retry: RetryPolicy,
}

impl AnthropicClient {
    pub fn new(
        base_url: &str,
        api_key: Secret,
        model: &str,
        timeout: Duration,
        retry: RetryPolicy,
    ) -> reqwest::Result<Self> {
        let http = reqwest::Client::builder().timeout(timeout).connect_timeout(Duration::from_secs(5)).build()?;
        Ok(Self { http, base_url: base_url.trim_end_matches('/').to_owned(), api_key, model: model.to_owned(), retry })
    }

    /// The request body; public so tests and logs can see exactly what is sent.
    pub fn body(&self, request: &ModelRequest) -> Value {
        let mut system =
            vec![json!({ "type": "text", "text": request.system_static, "cache_control": { "type": "ephemeral" } })];
        if !request.system_dynamic.is_empty() {
            system.push(json!({ "type": "text", "text": request.system_dynamic }));
        }
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_tokens,
            "system": system,
            "messages": request.messages.iter().map(message_json).collect::<Vec<_>>(),
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.input_schema }))
                .collect();
            let mut choice = json!({ "type": "auto" });
            if request.single_tool_call {
                choice["disable_parallel_tool_use"] = json!(true);
            }
            body["tool_choice"] = choice;
        }
        body
    }

    async fn attempt(&self, body: &Value) -> Attempt<ModelResponse> {
        let response = match self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("x-api-key", self.api_key.expose())
            .header("anthropic-version", API_VERSION)
            .json(body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return Attempt::Retry { message: transport_error(&e), after: None },
        };
        let status = response.status();
        let request_id = response.headers().get("request-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let after = retry_after(response.headers());
        let text = match response.text().await {
            Ok(t) => t,
            Err(e) => return Attempt::Retry { message: transport_error(&e), after: None },
        };
        tracing::debug!(?request_id, %status, "anthropic response");
        if status.is_success() {
            return match parse(&text, request_id) {
                Ok(r) => Attempt::Done(r),
                Err(e) => Attempt::Fail(e),
            };
        }
        let error: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = format!(
            "HTTP {status} {}: {} (request-id {})",
            error.pointer("/error/type").and_then(Value::as_str).unwrap_or("?"),
            error.pointer("/error/message").and_then(Value::as_str).unwrap_or(&text),
            request_id.as_deref().unwrap_or("-"),
        );
        let spend = error.pointer("/error/details/error_code").and_then(Value::as_str) == Some(SPEND_LIMIT_CODE);
        match status {
            StatusCode::TOO_MANY_REQUESTS if spend => Attempt::Fail(ModelError::SpendLimit { message }),
            StatusCode::TOO_MANY_REQUESTS => Attempt::Retry { message, after },
            s if transient_status(s) => Attempt::Retry { message, after },
            s => Attempt::Fail(ModelError::Rejected { status: s.as_u16(), message }),
        }
    }
}

fn message_json(m: &ChatMessage) -> Value {
    if m.role == Role::Assistant
        && let Some(raw) = &m.raw
    {
        return raw.clone();
    }
    let role = if m.role == Role::User { "user" } else { "assistant" };
    // Tool results must come first in a user message.
    let mut blocks: Vec<&Block> = m.blocks.iter().filter(|b| matches!(b, Block::ToolResult { .. })).collect();
    blocks.extend(m.blocks.iter().filter(|b| !matches!(b, Block::ToolResult { .. })));
    let content: Vec<Value> = blocks
        .into_iter()
        .map(|b| match b {
            Block::Text { text } => json!({ "type": "text", "text": text }),
            // Anthropic requires an object; an unusable input (kept from another provider) is
            // sent empty, its error already answered in the matching tool result.
            Block::ToolUse { id, name, input, .. } => {
                let input = if input.is_object() { input.clone() } else { json!({}) };
                json!({ "type": "tool_use", "id": id, "name": name, "input": input })
            }
            Block::ToolResult { tool_use_id, content, is_error } => {
                let mut v = json!({ "type": "tool_result", "tool_use_id": tool_use_id, "content": content });
                if *is_error {
                    v["is_error"] = json!(true);
                }
                v
            }
        })
        .collect();
    json!({ "role": role, "content": content })
}

/// Reads a `2xx` answer of the Anthropic Messages API as the client does: its blocks (each tool
/// call with its input, or why the input is unusable), stop reason, usage and the raw message
/// kept for history. Public for the fuzz targets; never panics.
pub fn parse(text: &str, request_id: Option<String>) -> Result<ModelResponse, ModelError> {
    let v: Value = serde_json::from_str(text).map_err(|e| ModelError::Malformed(e.to_string()))?;
    let content =
        v.get("content").and_then(Value::as_array).ok_or_else(|| ModelError::Malformed("no content array".into()))?;
    let mut blocks = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => blocks
                .push(Block::Text { text: block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned() }),
            Some("tool_use") => {
                let input = block.get("input").cloned().unwrap_or(Value::Null);
                blocks.push(Block::ToolUse {
                    id: block.get("id").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    name: block.get("name").and_then(Value::as_str).unwrap_or_default().to_owned(),
                    input_error: (!input.is_object()).then(|| "the tool input is not a JSON object".to_owned()),
                    input,
                });
            }
            // Thinking and future block types stay in `raw` for the echo; nothing to dispatch.
            other => tracing::info!(block_type = ?other, "ignoring an unknown content block"),
        }
    }
    let stop = match v.get("stop_reason").and_then(Value::as_str) {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens" | "model_context_window_exceeded") => StopReason::MaxTokens,
        Some("refusal") => StopReason::Refusal,
        other => {
            tracing::info!(stop_reason = ?other, "unknown stop reason");
            StopReason::Other(other.unwrap_or("none").to_owned())
        }
    };
    Ok(ModelResponse {
        blocks,
        stop,
        raw: json!({ "role": "assistant", "content": content }),
        request_id,
        input_tokens: v.pointer("/usage/input_tokens").and_then(Value::as_u64).unwrap_or(0),
        output_tokens: v.pointer("/usage/output_tokens").and_then(Value::as_u64).unwrap_or(0),
    })
}

#[async_trait]
impl ModelClient for AnthropicClient {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let body = self.body(request);
        self.retry.run(|| self.attempt(&body)).await
    }
}
