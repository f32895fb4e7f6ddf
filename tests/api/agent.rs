//! The model-driven turn end to end: webhook in, a loopback Anthropic server deciding, tools
//! through the executor, the reply in the outbox. Both databases.

use balcao::store::{BookingStore, HistoryStore, JobStore, OutboxStore};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::contract;
use crate::support::agent::{agent_config, slot};
use crate::support::common::{TestApp, TestDb, test_config};
use crate::support::fake_model::{FakeModel, Reply, ok, says, status, tool_use};
use crate::support::payloads::{bytes, text_payload};
use crate::support::scenario::Scenario;

async fn agent_app(db: &TestDb, fake: &FakeModel, extra: &[(&str, &str)]) -> (Scenario, TestApp) {
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, agent_config(fake, extra)).await;
    (s, app)
}

/// The tool results the model received in request `n`.
fn results(fake: &FakeModel, n: usize) -> Vec<Value> {
    let body = &fake.requests()[n].1;
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    last["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_result").cloned().collect()
}

async fn replies(db: &TestDb, s: &Scenario) -> Vec<String> {
    db.store.list_outbound(s.tenant.id).await.unwrap().iter().map(|r| r.message.0.body().to_owned()).collect()
}

contract!(a_customer_is_booked_from_a_chat_message, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let (s, app) = agent_app(db, &fake, &[]).await;
    let date = &at[..10];
    fake_script(
        &fake,
        vec![
            tool_use(&[("toolu_1", "check_availability", json!({ "service_id": s.corte, "date": date }))]),
            tool_use(&[(
                "toolu_2",
                "create_booking",
                json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }),
            )]),
            says("Pronto! Seu corte está marcado."),
        ],
    );
    assert_eq!(
        app.post_webhook(&bytes(&text_payload("wamid.b1", "5511999990001", "quero cortar o cabelo às 14h")))
            .await
            .status(),
        200
    );
    app.drain_turns().await;
    assert_eq!(replies(db, &s).await, ["Pronto! Seu corte está marcado."]);
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    let first = &fake.requests()[0].1;
    assert_eq!(first["tool_choice"]["disable_parallel_tool_use"], true);
    assert!(first["system"][0]["text"].as_str().unwrap().contains("Barbearia do Zé"));
    assert!(first["messages"][0]["content"][0]["text"].as_str().unwrap().contains("quero cortar"));
    let slots = &results(&fake, 1)[0]["content"];
    assert!(slots.as_str().unwrap().contains(&at), "{slots}");
    assert_eq!(results(&fake, 2)[0].get("is_error"), None);
});

/// The fake answers in the order requests arrive; tests add replies as they go.
fn fake_script(fake: &FakeModel, replies: Vec<Reply>) {
    for r in replies {
        fake.push(r);
    }
}

contract!(a_turn_retried_after_the_booking_ran_books_once, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let (s, app) = agent_app(db, &fake, &[]).await;
    let book = |id: &str| {
        tool_use(&[(id, "create_booking", json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }))])
    };
    let mut stuck = says("never delivered");
    stuck.delay = std::time::Duration::from_secs(30);
    fake_script(&fake, vec![book("toolu_A"), stuck]);
    app.post_webhook(&bytes(&text_payload("wamid.r1", "5511999990001", "marca pra mim"))).await;
    let start = Utc::now() + TimeDelta::seconds(60);
    let worker = app.worker.clone();
    let doomed = tokio::spawn(async move { worker.run_next_at(start).await });
    while db.store.count_active_appointments(s.tenant.id).await.unwrap() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    while fake.requests().len() < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    doomed.abort(); // the worker dies before replying

    // Asked again from scratch, the model repeats the call with a new id.
    fake_script(&fake, vec![book("toolu_B"), says("Já está agendado!")]);
    let later = start + TimeDelta::seconds(31);
    app.worker.maintain_at(later).await.unwrap();
    assert!(matches!(app.worker.run_next_at(later).await.unwrap(), balcao::jobs::RunOutcome::Completed(_)));
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    let repeat: Value = serde_json::from_str(results(&fake, 3)[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(repeat["already_done"], true);
    assert_eq!(replies(db, &s).await, ["Já está agendado!"]);
});

contract!(repeated_and_extra_writes_in_one_response_run_once, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let (s, app) = agent_app(db, &fake, &[]).await;
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at });
    fake_script(
        &fake,
        vec![
            tool_use(&[
                ("t1", "create_booking", input.clone()),
                ("t2", "create_booking", input.clone()),
                ("t3", "create_booking", json!({ "service_id": s.corte, "professional_id": s.rafa, "starts_at": at })),
                ("t4", "create_booking", json!({ "service_id": "corte", "professional_id": s.ze, "starts_at": at })),
            ]),
            says("Agendado."),
        ],
    );
    app.post_webhook(&bytes(&text_payload("wamid.p1", "5511999990001", "marca"))).await;
    app.drain_turns().await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    let r = results(&fake, 1);
    assert_eq!(r.iter().map(|b| b["tool_use_id"].as_str().unwrap()).collect::<Vec<_>>(), ["t1", "t2", "t3", "t4"]);
    assert_eq!(r[0]["content"], r[1]["content"], "identical calls share one execution");
    assert!(r[2]["content"].as_str().unwrap().contains("Not executed") && r[2]["is_error"] == true);
    assert_eq!(r[3]["is_error"], true);

    // A later turn where the model books again gets already_done.
    fake_script(&fake, vec![tool_use(&[("t9", "create_booking", input)]), says("Sim, está marcado.")]);
    app.post_webhook(&bytes(&text_payload("wamid.p2", "5511999990001", "e aí, marcou?"))).await;
    app.drain_turns().await;
    let again: Value = serde_json::from_str(results(&fake, 3)[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(again["already_done"], true);
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    // The second turn's request carried the first turn's history, pairs intact.
    let messages = fake.requests()[2].1["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 5, "user, assistant(tool_use), user(results), assistant(text), user");
});

contract!(a_failing_provider_still_gets_the_customer_an_answer, |db| async move {
    let fake = FakeModel::start(vec![]).await;
    let (s, app) = agent_app(db, &fake, &[]).await;
    let spend = json!({ "type": "error", "error": { "type": "rate_limit_error", "message": "cap",
                         "details": { "error_code": "enforced_spend_limit_reached" } } });
    fake_script(&fake, vec![status(429, spend)]);
    app.post_webhook(&bytes(&text_payload("wamid.f1", "5511999990001", "oi"))).await;
    app.drain_turns().await;
    assert_eq!(fake.requests().len(), 1, "a spend limit is not retried");
    let sent = replies(db, &s).await;
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains("Como posso ajudar?"), "the guided menu answers: {sent:?}");
});

contract!(long_conversations_are_trimmed_by_whole_turns, |db| async move {
    let fake = FakeModel::start(vec![]).await;
    let (s, app) =
        agent_app(db, &fake, &[("BALCAO_AGENT_HISTORY_BUDGET_CHARS", "12000"), ("BALCAO_AGENT_HISTORY_TURNS", "40")])
            .await;
    let c = s.customer(db, "5511999990001").await;
    use balcao::llm::{Block, ChatMessage, Role};
    for turn in 1..=40 {
        let messages = vec![
            ChatMessage::user_text(format!("mensagem {turn} {}", "x".repeat(300))),
            ChatMessage {
                role: Role::Assistant,
                blocks: vec![Block::ToolUse {
                    id: format!("toolu_{turn}"),
                    name: "list_services".into(),
                    input: json!({}),
                    input_error: None,
                }],
                raw: Some(
                    json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": format!("toolu_{turn}"), "name": "list_services", "input": {} }] }),
                ),
            },
            ChatMessage {
                role: Role::User,
                blocks: vec![Block::ToolResult {
                    tool_use_id: format!("toolu_{turn}"),
                    content: "{}".into(),
                    is_error: false,
                }],
                raw: None,
            },
            ChatMessage { role: Role::Assistant, blocks: vec![Block::Text { text: "ok".into() }], raw: None },
        ];
        db.store
            .record_turn(
                s.tenant.id,
                c.conversation,
                balcao::domain::JobId(turn - 100),
                None,
                "anthropic",
                &messages,
                Utc::now(),
            )
            .await
            .unwrap();
    }
    fake_script(&fake, vec![says("Oi!")]);
    app.post_webhook(&bytes(&text_payload("wamid.long", "5511999990001", "oi de novo"))).await;
    app.drain_turns().await;
    let body = &fake.requests()[0].1;
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.len() < 161 && messages.len() > 1, "{} messages", messages.len());
    assert!(serde_json::to_string(body).unwrap().len() <= 12_000 + 4_000, "within the budget plus tools");
    // Every tool_use is answered by the very next message.
    for (i, m) in messages.iter().enumerate() {
        for block in m["content"].as_array().into_iter().flatten().filter(|b| b["type"] == "tool_use") {
            let next = &messages[i + 1]["content"];
            assert!(next.as_array().unwrap().iter().any(|b| b["tool_use_id"] == block["id"]), "pair split at {i}");
        }
    }
    assert_eq!(messages[0]["role"], "user");
});

contract!(bad_tool_inputs_go_back_as_errors_and_overload_is_retried, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let (s, app) = agent_app(db, &fake, &[]).await;
    fake_script(
        &fake,
        vec![
            // A schema violation (an id as text), then a field that does not exist.
            tool_use(&[(
                "t1",
                "create_booking",
                json!({ "service_id": "corte", "professional_id": s.ze, "starts_at": at }),
            )]),
            tool_use(&[(
                "t2",
                "create_booking",
                json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at, "desconto": 10 }),
            )]),
            // Overloaded once: the client retries, the booking happens once.
            status(529, json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } })),
            tool_use(&[(
                "t3",
                "create_booking",
                json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }),
            )]),
            says("Marcado."),
        ],
    );
    app.post_webhook(&bytes(&text_payload("wamid.e1", "5511999990001", "marca"))).await;
    app.drain_turns().await;
    for n in [1, 2] {
        let r = &results(&fake, n)[0];
        assert_eq!(r["is_error"], true, "{r}");
        assert!(r["content"].as_str().unwrap().contains("invalid input"), "{r}");
    }
    assert_eq!(fake.requests().len(), 5, "the 529 was retried once");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    assert_eq!(replies(db, &s).await, ["Marcado."]);
});

// An OpenAI-compatible server whose model sends arguments that are not JSON.
contract!(openai_arguments_that_do_not_parse_go_back_as_errors, |db| async move {
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::new(db).await;
    let base = format!("{}/v1", fake.url);
    let mut config = test_config(
        "http://127.0.0.1:9",
        &[("AGENT", "openai"), ("OPENAI_MODEL", "llama3"), ("OPENAI_BASE_URL", base.as_str())],
    );
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;
    let call = |args: &str| {
        ok(
            json!({ "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": { "role": "assistant", "content": null,
            "tool_calls": [{ "id": "call_1", "type": "function", "function": { "name": "create_booking", "arguments": args } }] } }] }),
        )
    };
    let text = ok(
        json!({ "choices": [{ "index": 0, "finish_reason": "stop", "message": { "role": "assistant", "content": "Pode repetir?" } }] }),
    );
    fake_script(&fake, vec![call("{\"service_id\": 1,"), text]);
    app.post_webhook(&bytes(&text_payload("wamid.o1", "5511999990001", "marca"))).await;
    app.drain_turns().await;
    let sent = &fake.requests()[1].1;
    assert_eq!(fake.requests()[0].1["parallel_tool_calls"], false);
    let tool_message = sent["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(tool_message["role"], "tool");
    assert!(tool_message["content"].as_str().unwrap().contains("not valid JSON"), "{tool_message}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);
    assert_eq!(replies(db, &s).await, ["Pode repetir?"]);
});

contract!(an_empty_answer_does_not_poison_the_history, |db| async move {
    let fake = FakeModel::start(vec![]).await;
    let (s, app) = agent_app(db, &fake, &[]).await;
    fake_script(
        &fake,
        vec![
            tool_use(&[("t1", "list_services", json!({}))]),
            ok(json!({ "content": [], "stop_reason": "end_turn", "usage": {} })),
        ],
    );
    app.post_webhook(&bytes(&text_payload("wamid.x1", "5511999990001", "serviços?"))).await;
    app.drain_turns().await;
    assert!(replies(db, &s).await[0].contains("não consegui concluir"), "the polite give-up message");
    fake_script(&fake, vec![says("Oi de novo!")]);
    app.post_webhook(&bytes(&text_payload("wamid.x2", "5511999990001", "oi"))).await;
    app.drain_turns().await;
    let messages = fake.requests()[2].1["messages"].as_array().unwrap().clone();
    for m in &messages {
        assert!(m["content"].as_array().is_none_or(|c| !c.is_empty()), "empty message sent: {m}");
    }
    assert_eq!(messages[3]["role"], "assistant", "the turn was closed with the reply actually sent");
    // Both turns were recorded, each under its own job.
    let conversation = db.store.list_outbound(s.tenant.id).await.unwrap()[0].conversation_id;
    let jobs = db.store.jobs_of_conversation(s.tenant.id, balcao::domain::ConversationId(conversation)).await.unwrap();
    assert_eq!(jobs.len(), 2);
    for job in jobs {
        assert!(db.store.turn_recorded(s.tenant.id, balcao::domain::JobId(job.id)).await.unwrap(), "turn {}", job.id);
    }
});
