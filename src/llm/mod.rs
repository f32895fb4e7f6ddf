//! Model clients behind one trait, so the turn runner never knows which provider it talks to.
//!
//! Hand-rolled on reqwest + serde (no stale SDKs). Invariants:
//! - the assistant message is kept verbatim (`raw`) so history sent back is exactly what the
//!   model produced; the typed view is only for dispatch;
//! - unknown content blocks and stop reasons are tolerated and logged, never a crash;
//! - when write tools are offered the request asks for at most one tool call
//!   (`disable_parallel_tool_use` / `parallel_tool_calls: false`); the runner still defends;
//! - retries cover connection errors, 408, 409, 429 with `retry-after`, 5xx and 529, with
//!   exponential backoff and jitter, honouring `retry-after` up to 60 s; a spend-limit 429 and
//!   other 4xx are never retried.

pub mod anthropic;
pub mod openai;
mod retry;

pub use retry::RetryPolicy;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// One piece of a message, provider-neutral.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    /// A tool call. `input` is what the model sent; `input_error` says why it is unusable
    /// (OpenAI sends arguments as a JSON string that may not parse).
    ToolUse {
        id: String,
        name: String,
        input: Value,
        input_error: Option<String>,
    },
    ToolResult {
        tool_use_id: String,
        content: String,
        is_error: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// A history entry. Assistant messages carry the provider's own JSON (`raw`) to send back
/// unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub blocks: Vec<Block>,
    pub raw: Option<Value>,
}

impl ChatMessage {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self { role: Role::User, blocks: vec![Block::Text { text: text.into() }], raw: None }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// Instructions that do not change between turns (cached where the provider allows).
    pub system_static: String,
    /// Per-turn context (today's date, the customer, past side effects).
    pub system_dynamic: String,
    pub tools: Vec<ToolDef>,
    pub messages: Vec<ChatMessage>,
    /// Ask for at most one tool call (whenever a write tool is offered).
    pub single_tool_call: bool,
    pub max_tokens: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    Refusal,
    Other(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    pub blocks: Vec<Block>,
    pub stop: StopReason,
    /// The assistant message exactly as the provider returned it.
    pub raw: Value,
    pub request_id: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl ModelResponse {
    pub fn tool_uses(&self) -> impl Iterator<Item = &Block> {
        self.blocks.iter().filter(|b| matches!(b, Block::ToolUse { .. }))
    }

    pub fn text(&self) -> String {
        self.blocks
            .iter()
            .filter_map(|b| if let Block::Text { text } = b { Some(text.as_str()) } else { None })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("the provider's spend limit is reached; retrying cannot help until it resets")]
    SpendLimit { message: String },
    #[error("the provider refused the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    #[error("the provider is unavailable after {attempts} attempts: {message}")]
    Unavailable { attempts: u32, message: String },
    #[error("the provider's answer is unreadable: {0}")]
    Malformed(String),
}

#[async_trait]
pub trait ModelClient: Send + Sync {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;
}
