//! The core's promise under the cases a review found: refusals that must not go stale, bookings
//! that move and cancel, a customer booked twice by a retry, turn writes fenced by the job
//! lease, and a worker killed or paused in the middle of a call. Both databases.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use balcao::agent::{AgentSettings, AgentTurn};
use balcao::domain::{JobId, Secret};
use balcao::jobs::{Replier, RunOutcome, TurnHandler, Worker};
use balcao::ledger::{Executor, Outcome, Tool, ToolCall, ToolFailure, ToolSpec};
use balcao::llm::RetryPolicy;
use balcao::llm::anthropic::AnthropicClient;
use balcao::metrics::Metrics;
use balcao::store::{
    BookingStore, CatalogStore, HistoryStore, JobStore, LedgerStore, NewExecution, OutboxStore, Store, StoreError,
};
use balcao::store::{NewOutbound, OutboxKey};
use balcao::tenant::TenantSpec;
use balcao::whatsapp::{OutboundMessage, Recipient};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::contract;
use crate::support::agent::{agent_config, slot};
use crate::support::common::{TestApp, TestDb, test_config};
use crate::support::fake_model::{FakeModel, says, tool_use};
use crate::support::payloads::{bytes, text_payload};
use crate::support::queue::{record, timing};
use crate::support::scenario::executed;
use crate::support::scenario::{Scenario, catalog_file};

fn refusal(o: &Outcome) -> (&str, &Value) {
    match o {
        Outcome::Failed { error, details } => (error.as_str(), details),
        other => panic!("expected Failed, got {other:?}"),
    }
}

const WED_14: &str = "2026-03-11T14:00:00-03:00";
const WED_16: &str = "2026-03-11T16:00:00-03:00";

contract!(a_refusal_about_the_world_is_evaluated_again, |db| async move {
    let s = Scenario::new(db).await;
    let a = s.customer(db, "5511999990001").await;
    let b = s.customer(db, "5511999990002").await;
    let book = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": WED_14 });
    let held = executed(s.call(&b, "create_booking", book.clone()).await);
    let taken = s.call(&a, "create_booking", book.clone()).await;
    assert_eq!(refusal(&taken).1["reason"], "slot_taken");
    let rows = db.store.executions_of_conversation(s.tenant.id, a.conversation).await.unwrap();
    assert_eq!(rows[0].status, "refused", "the key is released");

    // B cancels: A's identical request is evaluated again, not replayed.
    assert_eq!(s.cancel(&b, &held["booking_id"]).await["status"], "executed");
    let booked = executed(s.call(&a, "create_booking", book).await);
    assert_eq!(booked["starts_at"], WED_14);

    // Outside hours now; once the hours change, the same request books.
    let late = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T19:00:00-03:00" });
    assert_eq!(refusal(&s.call(&a, "create_booking", late.clone()).await).1["reason"], "not_available");
    let longer = catalog_file("barbearia", crate::support::common::PHONE_NUMBER_ID, "America/Sao_Paulo")
        .replace("wed = [\"09:00-12:00\", \"13:00-18:00\"]", "wed = [\"09:00-12:00\", \"13:00-20:00\"]");
    let spec = TenantSpec::parse(&longer).unwrap();
    db.store.apply_catalog(s.tenant.id, &spec.catalog).await.unwrap();
    executed(s.call(&a, "create_booking", late).await);

    // A fact about the request is still replayed, without running again.
    let unknown = json!({ "service_id": 999, "professional_id": s.ze, "starts_at": WED_16 });
    let first = s.call(&a, "create_booking", unknown.clone()).await;
    assert!(refusal(&first).0.contains("unknown service"), "{first:?}");
    assert_eq!(s.call(&a, "create_booking", unknown).await, first);
    let rows = db.store.executions_of_conversation(s.tenant.id, a.conversation).await.unwrap();
    assert_eq!(rows.iter().find(|r| r.status == "failed_permanent").map(|r| r.replay_count), Some(1));
});

contract!(a_move_rekeys_the_booking_and_a_cancel_releases_every_key, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let at = |start: &str| json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": start });
    let booking = executed(s.call(&c, "create_booking", at(WED_14)).await);
    let id = booking["booking_id"].clone();
    executed(s.call(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": WED_16 })).await);

    // 14:00 is free again and asking for it books it; asking for 16:00 finds the moved booking.
    let again = executed(s.call(&c, "create_booking", at(WED_14)).await);
    assert_ne!(again["booking_id"], id);
    let found = s.call(&c, "create_booking", at(WED_16)).await;
    let found = match found {
        Outcome::Executed(v) | Outcome::AlreadyDone(v) => v,
        other => panic!("the moved booking should answer for its slot: {other:?}"),
    };
    assert_eq!((&found["booking_id"], &found["starts_at"]), (&id, &json!(WED_16)));
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 2);

    // Cancelling supersedes the move too: repeating it now is evaluated, and refused.
    assert_eq!(s.cancel(&c, &id).await["status"], "executed");
    let moved_again = s.call(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": WED_16 })).await;
    assert!(refusal(&moved_again).0.contains("not found"), "{moved_again:?}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(a_customer_is_not_booked_twice_at_the_same_time, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let with_ze = executed(
        s.call(&c, "create_booking", json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": WED_14 }))
            .await,
    );
    // "Any professional" after a retry: Rafa is free at 14:00 on Wednesdays, the customer is not.
    let with_rafa = s
        .call(&c, "create_booking", json!({ "service_id": s.corte, "professional_id": s.rafa, "starts_at": WED_14 }))
        .await;
    let (error, details) = refusal(&with_rafa);
    assert_eq!(details["reason"], "customer_busy");
    assert_eq!(details["booking_id"], with_ze["booking_id"]);
    assert!(error.contains(&with_ze["booking_id"].to_string()), "{error}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    // Another customer takes Rafa at that time without trouble.
    let other = s.customer(db, "5511999990002").await;
    executed(
        s.call(
            &other,
            "create_booking",
            json!({ "service_id": s.corte, "professional_id": s.rafa, "starts_at": WED_14 }),
        )
        .await,
    );
});

contract!(a_started_booking_is_neither_moved_nor_cancelled, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let booking = executed(
        s.call(&c, "create_booking", json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": WED_14 }))
            .await,
    );
    let id = booking["booking_id"].clone();
    let during = chrono::DateTime::parse_from_rfc3339("2026-03-11T14:10:00-03:00").unwrap().to_utc();
    let cancel = s.call_at(&c, "cancel_booking", json!({ "booking_id": id }), during).await;
    assert!(refusal(&cancel).0.contains("already started"), "{cancel:?}");
    let moved = s.call_at(&c, "reschedule_booking", json!({ "booking_id": id, "starts_at": WED_16 }), during).await;
    assert!(refusal(&moved).0.contains("already started"), "{moved:?}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(a_stale_worker_can_neither_reply_nor_record_history, |db| async move {
    let tenant = db.tenant().await;
    let start = Utc::now();
    let (conversation, _) = record(&db.store, &tenant, "wamid.fence", "5511999990001", &timing(0, 0, 5), start).await;
    let lease = TimeDelta::seconds(30);
    let a = db.store.claim_next("a", start, start + lease).await.unwrap().unwrap();
    let later = start + lease + TimeDelta::seconds(1);
    db.store.reap_expired(later).await.unwrap();
    let b = db.store.claim_next("b", later, later + lease).await.unwrap().unwrap();
    assert_eq!((a.id, b.attempt), (b.id, 2));

    let reply = |lease: &balcao::store::Lease, seq: u32| NewOutbound {
        tenant: tenant.id,
        conversation,
        key: OutboxKey::for_turn(a.id, seq),
        recipient: Recipient {
            wa_id: Some(balcao::domain::PhoneE164::parse("+5511999990001").unwrap()),
            user_id: None,
        },
        message: OutboundMessage::text("Oi").unwrap(),
        local: true,
        written_by: Some(lease.clone()),
        unless_handed_off: false,
    };
    let stale = db.store.enqueue_outbound(&reply(&a.lease, 0), later).await;
    assert!(matches!(stale, Err(StoreError::LeaseLost)), "{stale:?}");
    assert!(db.store.enqueue_outbound(&reply(&b.lease, 0), later).await.unwrap().is_some());
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap().len(), 1);

    let history = [balcao::llm::ChatMessage::user_text("oi")];
    let stale = db.store.record_turn(tenant.id, conversation, a.id, Some(&a.lease), "anthropic", &history, later).await;
    assert!(matches!(stale, Err(StoreError::LeaseLost)), "{stale:?}");
    assert!(!db.store.turn_recorded(tenant.id, a.id).await.unwrap());
    db.store.record_turn(tenant.id, conversation, b.id, Some(&b.lease), "anthropic", &history, later).await.unwrap();
    assert!(db.store.turn_recorded(tenant.id, b.id).await.unwrap());
});

contract!(the_turn_context_lists_calls_still_in_flight, |db| async move {
    let fake = FakeModel::start(vec![says("Já estou vendo isso.")]).await;
    let s = Scenario::new(db).await;
    let c = s.customer(db, "5511999990001").await;
    let key = balcao::domain::LedgerKey::from_stored("create_booking/v1/inflight".into());
    let arguments = json!({ "professional_id": s.ze, "starts_at": "2026-03-11T17:00Z" });
    let new = NewExecution {
        tenant: s.tenant.id,
        key: &key,
        tool: "create_booking",
        fingerprint: "f",
        arguments: &arguments,
        conversation: c.conversation,
        contact: c.contact,
        turn: None,
        tool_use_id: None,
        turn_attempt: None,
    };
    db.store.reserve_execution(&new, Utc::now(), Utc::now() + TimeDelta::minutes(2)).await.unwrap();
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    app.drain_turns().await;
    let system = fake.requests()[0].1["system"].to_string();
    assert!(system.contains("create_booking") && system.contains("in progress"), "{system}");
});

/// Wraps a tool: its first call stops where a dying worker would, after the ledger reserved
/// the key and before anything else (see [`Stop`]); later calls run the tool.
struct StopsOnce {
    inner: Arc<dyn Tool>,
    calls: AtomicUsize,
    stop: Stop,
}

enum Stop {
    /// Never returns: the task is killed there.
    Forever(Arc<Notify>),
    /// Blocks the whole thread (its runtime, heartbeats included, as SIGSTOP would) until
    /// released.
    Thread { reached: std::sync::mpsc::Sender<()>, resume: std::sync::Mutex<std::sync::mpsc::Receiver<()>> },
}

#[async_trait]
impl Tool for StopsOnce {
    fn spec(&self) -> &'static ToolSpec {
        self.inner.spec()
    }

    async fn run(&self, call: &ToolCall<'_>) -> Result<Value, ToolFailure> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            match &self.stop {
                Stop::Forever(reached) => {
                    reached.notify_one();
                    std::future::pending::<()>().await;
                }
                Stop::Thread { reached, resume } => {
                    let _ = reached.send(());
                    if let Ok(resume) = resume.lock() {
                        let _ = resume.recv();
                    }
                }
            }
        }
        self.inner.run(call).await
    }
}

/// The model-driven turn as the app builds it, with `create_booking` wrapped.
fn agent_with(store: &Store, replier: Replier, fake: &FakeModel, stop: Stop) -> Arc<dyn TurnHandler> {
    let executor = Executor::new(store.clone(), Duration::from_secs(120));
    let clicks = Arc::new(balcao::actions::ClickHandler::new(
        store.clone(),
        replier.clone(),
        crate::support::common::sandbox_gateways(),
        Duration::from_secs(120),
    ));
    let mut tools = balcao::agent::tools::booking_tools(store, &clicks.proposer, &clicks);
    for tool in &mut tools {
        if tool.spec().name == "create_booking" {
            *tool = Arc::new(StopsOnce { inner: tool.clone(), calls: AtomicUsize::new(0), stop });
            break;
        }
    }
    let model = AnthropicClient::new(
        &fake.url,
        Secret::new("sk-test"),
        "claude-test",
        Duration::from_secs(10),
        RetryPolicy::default(),
    )
    .unwrap();
    let guided = Arc::new(balcao::agent::GuidedTurn {
        executor: executor.clone(),
        tools: tools.clone(),
        replier: replier.clone(),
    });
    Arc::new(AgentTurn {
        store: store.clone(),
        executor,
        model: Arc::new(model),
        provider: "anthropic",
        replier,
        tools,
        settings: AgentSettings { max_steps: 6, max_tokens: 512, history_turns: 20, history_budget_chars: 60_000 },
        fallback: guided,
        audience: balcao::agent::Audience::Customer,
        metrics: balcao::metrics::Metrics::new(),
    })
}

/// Every `tool_use` in the stored history is answered by the next message.
async fn assert_history_well_formed(db: &TestDb, s: &Scenario, turn: JobId) {
    let conversation = db.store.list_outbound(s.tenant.id).await.unwrap()[0].conversation_id;
    let history = db
        .store
        .history(s.tenant.id, balcao::domain::ConversationId(conversation), JobId(turn.0 + 1), 10)
        .await
        .unwrap();
    assert!(!history.is_empty());
    let messages: Vec<Value> = history.iter().map(|m| serde_json::to_value(&m.message).unwrap()).collect();
    for (i, m) in messages.iter().enumerate() {
        for used in m["blocks"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_use") {
            let next = messages.get(i + 1).and_then(|n| n["blocks"].as_array()).cloned().unwrap_or_default();
            assert!(
                next.iter().any(|b| b["tool_use_id"] == used["id"]),
                "tool_use {} unanswered: {messages:?}",
                used["id"]
            );
        }
    }
    assert_eq!(history.last().map(|m| m.message.role), Some(balcao::llm::Role::Assistant));
}

contract!(a_worker_killed_between_reservation_and_settle_books_once_with_default_leases, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::new(db).await;
    let reached = Arc::new(Notify::new());
    let stop = Stop::Forever(reached.clone());
    // Default job and ledger leases (60 s and 120 s): the retry must not wait for the ledger's.
    let config = agent_config(&fake, &[("BALCAO_JOB_LEASE_SECONDS", "60")]);
    let lease = config.queue.lease;
    let store = db.store.clone();
    let handler_fake = fake.clone();
    let app = TestApp::spawn_with(db, config, move |ctx| agent_with(&store, ctx.replier, &handler_fake, stop)).await;
    let book = |id: &str| {
        tool_use(&[(id, "create_booking", json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }))])
    };
    fake.push(book("toolu_A"));
    app.post_webhook(&bytes(&text_payload("wamid.k1", "5511999990001", "marca às 14h"))).await;
    let start = Utc::now() + TimeDelta::seconds(60);
    let worker = app.worker.clone();
    let doomed = tokio::spawn(async move { worker.run_next_at(start).await });
    reached.notified().await;
    doomed.abort(); // killed with the key reserved and nothing else done
    assert!(doomed.await.unwrap_err().is_cancelled());
    let rows = db.store.executions_of_conversation(s.tenant.id, balcao::domain::ConversationId(1)).await.unwrap();
    assert!(rows.iter().all(|r| r.status == "running"), "{rows:?}");

    // The job lease runs out, the turn is retried; its call takes the row over at once.
    fake.push(book("toolu_B"));
    fake.push(says("Pronto, agendado!"));
    let later = start + chrono::TimeDelta::from_std(lease).unwrap() + TimeDelta::seconds(1);
    app.worker.maintain_at(later).await.unwrap();
    let rerun = app.worker.run_next_at(later).await.unwrap();
    assert!(matches!(rerun, RunOutcome::Completed(_)), "{rerun:?}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    let requests = fake.requests();
    let result = &requests[2].1["messages"].as_array().unwrap().last().unwrap()["content"][0];
    assert!(!result["content"].as_str().unwrap().contains("already_in_progress"), "{result}");
    let replies: Vec<String> =
        db.store.list_outbound(s.tenant.id).await.unwrap().iter().map(|r| r.message.0.body().to_owned()).collect();
    assert_eq!(replies, ["Pronto, agendado!"]);
    let RunOutcome::Completed(turn) = rerun else { unreachable!() };
    assert_history_well_formed(db, &s, turn).await;
});

contract!(a_paused_worker_resumed_after_its_lease_leaves_one_reply_and_a_well_formed_history, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::new(db).await;
    let config = agent_config(&fake, &[]);
    // Worker B is the app; worker A is another "process": its own store, runtime and thread.
    let app = TestApp::spawn(db, config.clone()).await;
    let store_a = db.reopen().await;
    let (reached_tx, reached) = std::sync::mpsc::channel();
    let (resume, resume_rx) = std::sync::mpsc::channel();
    let stop = Stop::Thread { reached: reached_tx, resume: std::sync::Mutex::new(resume_rx) };
    let replier_a = Replier::new(store_a.clone(), None, true, Arc::new(Notify::new()));
    let handler_a = agent_with(&store_a, replier_a, &fake, stop);
    let worker_a = Worker::new("a".into(), store_a, handler_a, config.queue.clone(), Metrics::new());

    let book = |id: &str| {
        tool_use(&[(id, "create_booking", json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": at }))])
    };
    fake.push(book("toolu_A"));
    app.post_webhook(&bytes(&text_payload("wamid.p1", "5511999990001", "marca às 14h"))).await;
    let start = Utc::now() + TimeDelta::seconds(60);
    let a = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(worker_a.run_next_at(start))
    });
    reached.recv().unwrap(); // A is frozen inside its call, the key reserved

    // B reaps A's job once its lease is past and answers the turn.
    fake.push(book("toolu_B"));
    fake.push(says("Pronto, agendado!"));
    let later = start + chrono::TimeDelta::from_std(config.queue.lease).unwrap() + TimeDelta::seconds(1);
    app.worker.maintain_at(later).await.unwrap();
    let by_b = app.worker.run_next_at(later).await.unwrap();
    assert!(matches!(by_b, RunOutcome::Completed(_)), "{by_b:?}");

    // A wakes up and carries on as if nothing happened: it may ask the model once more.
    fake.push(says("Resposta atrasada"));
    resume.send(()).unwrap();
    let by_a = tokio::task::spawn_blocking(move || a.join().unwrap()).await.unwrap().unwrap();
    assert!(matches!(by_a, RunOutcome::LeaseLost(_)), "{by_a:?}");

    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    let replies: Vec<String> =
        db.store.list_outbound(s.tenant.id).await.unwrap().iter().map(|r| r.message.0.body().to_owned()).collect();
    assert_eq!(replies, ["Pronto, agendado!"]);
    let RunOutcome::Completed(turn) = by_b else { unreachable!() };
    assert_history_well_formed(db, &s, turn).await;
});

/// Counts its runs; waits to be released before finishing.
struct Held {
    runs: AtomicUsize,
    release: Arc<Notify>,
}

#[async_trait]
impl TurnHandler for Held {
    async fn handle(&self, _turn: &balcao::jobs::Turn) -> anyhow::Result<()> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.release.notified().await;
        Ok(())
    }
}

/// PostgreSQL only: SQLite lives on one machine, with one clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_leases_follow_the_database_clock_not_a_skewed_server() {
    let Some(db) = TestDb::postgres().await else { return };
    let tenant = db.tenant().await;
    record(&db.store, &tenant, "wamid.skew", "5511999990001", &timing(0, 0, 5), Utc::now()).await;
    let config = test_config("http://127.0.0.1:9", &[]);
    let release = Arc::new(Notify::new());
    let held = Arc::new(Held { runs: AtomicUsize::new(0), release: release.clone() });
    let worker =
        |id: &str, store: Store| Worker::new(id.into(), store, held.clone(), config.queue.clone(), Metrics::new());

    // Server A's clock is right; it claims the turn and works on it.
    let a = worker("a", db.store.clone());
    let running = tokio::spawn(async move { a.run_next_at(Utc::now()).await });
    while held.runs.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Server B's clock runs ten minutes ahead: by its own reading A's lease is long gone.
    let ahead = TimeDelta::minutes(10);
    let store_b = db.reopen().await;
    let skew = store_b.sync_clock_with(|| Utc::now() + ahead).await.unwrap();
    assert!((skew + ahead).abs() < TimeDelta::seconds(5), "measured {skew}");
    let b = worker("b", store_b);
    b.maintain_at(Utc::now() + ahead).await.unwrap();
    assert_eq!(b.run_next_at(Utc::now() + ahead).await.unwrap(), RunOutcome::Empty);
    assert_eq!(held.runs.load(Ordering::SeqCst), 1, "the turn ran once");

    release.notify_one();
    assert!(matches!(running.await.unwrap().unwrap(), RunOutcome::Completed(_)));
    db.cleanup().await;
}
