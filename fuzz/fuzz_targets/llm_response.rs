//! The model providers' answers (Anthropic Messages, OpenAI Chat Completions), and the echo of
//! a parsed answer into the next request's history. The first byte picks the provider.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use balcao::domain::Secret;
use balcao::llm::anthropic::{self, AnthropicClient};
use balcao::llm::openai::{self, OpenAiClient};
use balcao::llm::{Block, ChatMessage, ModelRequest, RetryPolicy, Role};
use libfuzzer_sys::fuzz_target;

fn clients() -> &'static (AnthropicClient, OpenAiClient) {
    static CLIENTS: OnceLock<(AnthropicClient, OpenAiClient)> = OnceLock::new();
    CLIENTS.get_or_init(|| {
        let timeout = Duration::from_secs(1);
        let anthropic =
            AnthropicClient::new("http://127.0.0.1:9", Secret::new("k"), "m", timeout, RetryPolicy::default());
        let openai = OpenAiClient::new("http://127.0.0.1:9", None, "m", true, timeout, RetryPolicy::default());
        (anthropic.expect("a client"), openai.expect("a client"))
    })
}

fuzz_target!(|data: &[u8]| {
    let [which, rest @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let anthropic = which % 2 == 0;
    let parsed = if anthropic { anthropic::parse(text, None) } else { openai::parse(text, None) };
    let Ok(response) = parsed else { return };
    let mut messages = vec![ChatMessage::user_text("oi")];
    let results: Vec<Block> = response
        .tool_uses()
        .filter_map(|b| match b {
            Block::ToolUse { id, .. } => {
                Some(Block::ToolResult { tool_use_id: id.clone(), content: "ok".into(), is_error: false })
            }
            _ => None,
        })
        .collect();
    messages.push(ChatMessage {
        role: Role::Assistant,
        blocks: response.blocks.clone(),
        raw: Some(response.raw.clone()),
    });
    if !results.is_empty() {
        messages.push(ChatMessage { role: Role::User, blocks: results, raw: None });
    }
    let request = ModelRequest {
        system_static: "s".into(),
        system_dynamic: String::new(),
        tools: Vec::new(),
        messages,
        single_tool_call: true,
        max_tokens: 64,
    };
    let (a, o) = clients();
    let _ = if anthropic { a.body(&request) } else { o.body(&request) };
});
