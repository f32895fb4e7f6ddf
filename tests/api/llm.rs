//! The model clients against loopback servers that speak the documented wire formats,
//! including errors, retries and timeouts.

use std::time::Duration;

use balcao::domain::Secret;
use balcao::llm::anthropic::AnthropicClient;
use balcao::llm::openai::OpenAiClient;
use balcao::llm::{Block, ChatMessage, ModelClient, ModelError, ModelRequest, RetryPolicy, Role, StopReason, ToolDef};
use serde_json::{Value, json};

use crate::support::fake_model::{FakeModel, ok, status};

fn fast_retry() -> RetryPolicy {
    RetryPolicy { max_retries: 2, base_delay: Duration::from_millis(10), max_delay: Duration::from_millis(50) }
}

fn anthropic(fake: &FakeModel) -> AnthropicClient {
    AnthropicClient::new(&fake.url, Secret::new("sk-ant-test"), "claude-test", Duration::from_millis(500), fast_retry())
        .unwrap()
}

fn openai(fake: &FakeModel, parallel_flag: bool) -> OpenAiClient {
    OpenAiClient::new(
        &format!("{}/v1", fake.url),
        Some(Secret::new("sk-test")),
        "gpt-test",
        parallel_flag,
        Duration::from_millis(500),
        fast_retry(),
    )
    .unwrap()
}

fn request() -> ModelRequest {
    ModelRequest {
        system_static: "Você é a recepcionista da Barbearia do Zé.".into(),
        system_dynamic: "Hoje é 2026-03-10.".into(),
        tools: vec![ToolDef {
            name: "create_booking".into(),
            description: "Agenda".into(),
            input_schema: json!({ "type": "object", "properties": { "service_id": { "type": "integer" } } }),
        }],
        messages: vec![ChatMessage::user_text("quero cortar o cabelo amanhã às 14h")],
        single_tool_call: true,
        max_tokens: 1024,
    }
}

fn anthropic_tool_use() -> Value {
    json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            { "type": "thinking", "thinking": "...", "signature": "sig" },
            { "type": "text", "text": "Vou agendar." },
            { "type": "tool_use", "id": "toolu_01", "name": "create_booking", "input": { "service_id": 1 } }
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": { "input_tokens": 212, "output_tokens": 61 }
    })
}

fn overloaded() -> Value {
    json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } })
}

#[tokio::test]
async fn anthropic_request_and_response_follow_the_documented_shapes() {
    let fake = FakeModel::start(vec![ok(anthropic_tool_use())]).await;
    let response = anthropic(&fake).complete(&request()).await.unwrap();
    let (headers, body) = &fake.requests()[0];
    assert_eq!(headers["x-api-key"], "sk-ant-test");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(body["tool_choice"], json!({ "type": "auto", "disable_parallel_tool_use": true }));
    assert_eq!(body["system"][0]["cache_control"], json!({ "type": "ephemeral" }));
    assert_eq!(body["system"][1]["text"], "Hoje é 2026-03-10.");
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    assert!(body.get("temperature").is_none());

    assert_eq!(response.stop, StopReason::ToolUse);
    assert_eq!(response.request_id.as_deref(), Some("req_test"));
    assert_eq!(response.text(), "Vou agendar.");
    assert_eq!(
        response.tool_uses().cloned().collect::<Vec<_>>(),
        [Block::ToolUse {
            id: "toolu_01".into(),
            name: "create_booking".into(),
            input: json!({ "service_id": 1 }),
            input_error: None
        }]
    );
    // The unknown (thinking) block is not dispatched but is kept to be sent back verbatim.
    assert_eq!(response.raw["content"].as_array().unwrap().len(), 3);

    // Without write tools, no parallel switch is sent.
    let mut read_only = request();
    read_only.single_tool_call = false;
    let fake = FakeModel::start(vec![ok(anthropic_tool_use())]).await;
    anthropic(&fake).complete(&read_only).await.unwrap();
    assert_eq!(fake.requests()[0].1["tool_choice"], json!({ "type": "auto" }));
}

#[tokio::test]
async fn anthropic_history_is_echoed_verbatim_with_results_first() {
    let fake = FakeModel::start(vec![
        ok(anthropic_tool_use()),
        ok(json!({
            "content": [{ "type": "text", "text": "Pronto!" }], "stop_reason": "end_turn", "usage": {}
        })),
    ])
    .await;
    let client = anthropic(&fake);
    let first = client.complete(&request()).await.unwrap();
    let mut next = request();
    next.messages.push(ChatMessage {
        role: Role::Assistant,
        blocks: first.blocks.clone(),
        raw: Some(first.raw.clone()),
    });
    next.messages.push(ChatMessage {
        role: Role::User,
        blocks: vec![
            Block::Text { text: "obrigado".into() },
            Block::ToolResult { tool_use_id: "toolu_01".into(), content: "{\"booking_id\":7}".into(), is_error: false },
        ],
        raw: None,
    });
    let done = client.complete(&next).await.unwrap();
    assert_eq!((done.stop.clone(), done.text()), (StopReason::EndTurn, "Pronto!".to_owned()));
    let sent = &fake.requests()[1].1["messages"];
    assert_eq!(sent[1], first.raw);
    assert_eq!(sent[2]["content"][0]["type"], "tool_result");
    assert_eq!(sent[2]["content"][1]["type"], "text");
}

#[tokio::test]
async fn anthropic_retries_overload_and_server_errors_then_succeeds() {
    let fake =
        FakeModel::start(vec![status(529, overloaded()), status(500, json!({})), ok(anthropic_tool_use())]).await;
    let response = anthropic(&fake).complete(&request()).await.unwrap();
    assert_eq!(response.stop, StopReason::ToolUse);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn anthropic_gives_up_after_its_retries() {
    let fake = FakeModel::start(vec![status(529, overloaded()); 3]).await;
    let err = anthropic(&fake).complete(&request()).await.unwrap_err();
    assert!(matches!(err, ModelError::Unavailable { attempts: 3, .. }), "{err:?}");
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn anthropic_never_retries_a_spend_limit_or_a_bad_request() {
    let spend = json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "spend limit",
                         "details": { "error_code": "enforced_spend_limit_reached" } } });
    let fake = FakeModel::start(vec![status(429, spend)]).await;
    assert!(matches!(anthropic(&fake).complete(&request()).await, Err(ModelError::SpendLimit { .. })));
    assert_eq!(fake.requests().len(), 1);

    let bad = json!({ "type": "error", "error": { "type": "invalid_request_error", "message": "messages.1: tool_use ids must be unique" } });
    let fake = FakeModel::start(vec![status(400, bad)]).await;
    let err = anthropic(&fake).complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Rejected { status: 400, message } if message.contains("must be unique")),
        "{err:?}"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn anthropic_rate_limit_honours_retry_after_and_timeouts_are_retried() {
    let mut limited =
        status(429, json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "slow down" } }));
    limited.headers = vec![("retry-after", "1")];
    let mut slow = ok(anthropic_tool_use());
    slow.delay = Duration::from_secs(2);
    let fake = FakeModel::start(vec![limited, slow, ok(anthropic_tool_use())]).await;
    anthropic(&fake).complete(&request()).await.unwrap();
    assert_eq!(fake.requests().len(), 3, "429 → wait → timeout → success");
}

#[tokio::test]
async fn anthropic_tolerates_unknown_stop_reasons_and_odd_inputs() {
    let fake = FakeModel::start(vec![ok(json!({
        "content": [{ "type": "tool_use", "id": "toolu_9", "name": "create_booking", "input": "not an object" },
                    { "type": "brand_new_block", "x": 1 }],
        "stop_reason": "some_future_reason"
    }))])
    .await;
    let response = anthropic(&fake).complete(&request()).await.unwrap();
    assert_eq!(response.stop, StopReason::Other("some_future_reason".into()));
    assert!(matches!(&response.blocks[0], Block::ToolUse { input_error: Some(_), .. }));
    let fake = FakeModel::start(vec![ok(json!({ "unexpected": true }))]).await;
    assert!(matches!(anthropic(&fake).complete(&request()).await, Err(ModelError::Malformed(_))));
}

fn openai_reply(arguments: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "refusal": null,
            "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": "create_booking", "arguments": arguments } }]
        }}],
        "usage": { "prompt_tokens": 89, "completion_tokens": 17, "total_tokens": 106 }
    })
}

#[tokio::test]
async fn openai_request_and_response_follow_the_documented_shapes() {
    let fake = FakeModel::start(vec![ok(openai_reply("{\"service_id\":1}"))]).await;
    let response = openai(&fake, true).complete(&request()).await.unwrap();
    let (headers, body) = &fake.requests()[0];
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(body["messages"][0]["content"].as_str().unwrap().contains("Hoje é 2026-03-10."));
    assert_eq!(
        (response.stop.clone(), response.input_tokens, response.request_id.as_deref()),
        (StopReason::ToolUse, 89, Some("req_oa"))
    );
    assert!(
        matches!(&response.blocks[0], Block::ToolUse { input, input_error: None, .. } if input == &json!({ "service_id": 1 }))
    );

    // Tool results go back as `tool` messages after the verbatim assistant message.
    let mut next = request();
    next.messages.push(ChatMessage {
        role: Role::Assistant,
        blocks: response.blocks.clone(),
        raw: Some(response.raw.clone()),
    });
    next.messages.push(ChatMessage {
        role: Role::User,
        blocks: vec![Block::ToolResult { tool_use_id: "call_1".into(), content: "slot taken".into(), is_error: true }],
        raw: None,
    });
    let fake = FakeModel::start(vec![ok(openai_reply("{}"))]).await;
    openai(&fake, false).complete(&next).await.unwrap();
    let sent = &fake.requests()[0].1;
    assert!(sent.get("parallel_tool_calls").is_none(), "configured off for models that reject it");
    assert_eq!(sent["messages"][2], response.raw);
    assert_eq!(
        sent["messages"][3],
        json!({ "role": "tool", "tool_call_id": "call_1", "content": "Error: slot taken" })
    );
}

#[tokio::test]
async fn openai_invalid_arguments_become_an_input_error_not_a_guess() {
    let fake = FakeModel::start(vec![ok(openai_reply("{\"service_id\": 1,")), ok(openai_reply("[1]"))]).await;
    let client = openai(&fake, true);
    let broken = client.complete(&request()).await.unwrap();
    assert!(matches!(&broken.blocks[0], Block::ToolUse { input, input_error: Some(e), .. }
        if input == &json!("{\"service_id\": 1,") && e.contains("not valid JSON")));
    let not_object = client.complete(&request()).await.unwrap();
    assert!(
        matches!(&not_object.blocks[0], Block::ToolUse { input_error: Some(e), .. } if e.contains("not a JSON object"))
    );
}

#[tokio::test]
async fn openai_retries_server_errors_but_not_an_exhausted_quota() {
    let fake =
        FakeModel::start(vec![status(503, json!({ "error": { "message": "busy" } })), ok(openai_reply("{}"))]).await;
    openai(&fake, true).complete(&request()).await.unwrap();
    assert_eq!(fake.requests().len(), 2);
    let quota = json!({ "error": { "message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota" } });
    let fake = FakeModel::start(vec![status(429, quota)]).await;
    assert!(matches!(openai(&fake, true).complete(&request()).await, Err(ModelError::SpendLimit { .. })));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn odd_retry_after_values_never_crash_and_long_waits_are_not_retried() {
    let mut weird = status(429, json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "x" } }));
    weird.headers = vec![("retry-after", "-1")];
    let mut nan = weird.clone();
    nan.headers = vec![("retry-after", "NaN")];
    let fake = FakeModel::start(vec![weird, nan, ok(anthropic_tool_use())]).await;
    anthropic(&fake).complete(&request()).await.unwrap();
    assert_eq!(fake.requests().len(), 3);

    let mut hour = status(429, json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "later" } }));
    hour.headers = vec![("retry-after", "3600")];
    let fake = FakeModel::start(vec![hour]).await;
    assert!(matches!(anthropic(&fake).complete(&request()).await, Err(ModelError::Unavailable { attempts: 1, .. })));
    assert_eq!(fake.requests().len(), 1);
}
