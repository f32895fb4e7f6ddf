//! The whole server as it runs in production: background workers and sender, real HTTP in,
//! the fake Graph API out, graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use balcao::app::App;
use balcao::domain::ConversationId;
use balcao::jobs::{Replier, Turn, TurnHandler};
use balcao::store::{JobStore, OutboxStore};
use balcao::whatsapp::OutboundMessage;
use tokio::sync::oneshot;

use crate::contract;
use crate::support::common::{APP_SECRET, test_config};
use crate::support::fake_graph::FakeGraph;
use crate::support::payloads::{bytes, fixture};

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Runs the whole app (HTTP, workers, sender) until `stop` is sent; returns its URL.
fn run(app: App) -> (String, oneshot::Sender<()>, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let url = format!("http://{}", app.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    (url, stop, server)
}

fn signed_post(client: &reqwest::Client, url: &str, body: &[u8]) -> reqwest::RequestBuilder {
    client
        .post(format!("{url}/webhooks/whatsapp"))
        .header("x-hub-signature-256", balcao::whatsapp::signature::sign(APP_SECRET.as_bytes(), body))
        .body(body.to_vec())
}

contract!(a_message_is_answered_end_to_end, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let config = test_config(&graph.url, &[("BALCAO_DEBOUNCE_MS", "50"), ("BALCAO_DEBOUNCE_MAX_MS", "200")]);
    let app = App::build(config, db.store.clone()).await.unwrap();
    let (url, stop, server) = run(app);
    let client = reqwest::Client::new();
    let status = signed_post(&client, &url, &bytes(&fixture("text"))).send().await.unwrap().status();
    assert_eq!(status, 200);
    wait_for("the reply to reach WhatsApp", async || !graph.sends().is_empty()).await;
    let send = &graph.sends()[0];
    assert_eq!(send.body["to"], "+16505551234");
    assert_eq!(send.body["type"], "interactive", "the guided menu answers");
    assert!(send.body["interactive"]["body"]["text"].as_str().unwrap().contains("Barbearia do Zé"));
    wait_for("the outbox row to be marked sent", async || {
        db.store.list_outbound(tenant.id).await.unwrap().first().is_some_and(|r| r.status == "sent")
    })
    .await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    assert_eq!(graph.sends().len(), 1);
});

/// Takes its time, so shutdown finds it in flight.
struct Slow {
    replier: Replier,
    started: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl TurnHandler for Slow {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        self.started.notify_one();
        tokio::time::sleep(Duration::from_millis(400)).await;
        self.replier.reply(turn, 0, OutboundMessage::text("Pronto!")?);
        Ok(())
    }
}

contract!(shutdown_finishes_in_flight_turns, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let mut config = test_config(&graph.url, &[("BALCAO_DEBOUNCE_MS", "0"), ("BALCAO_DEBOUNCE_MAX_MS", "0")]);
    config.whatsapp.access_token = None; // keep the reply local: this is about the turn
    let started = Arc::new(tokio::sync::Notify::new());
    let s = started.clone();
    let app = App::build_with(config, db.store.clone(), move |ctx| Arc::new(Slow { replier: ctx.replier, started: s }))
        .await
        .unwrap();
    let (url, stop, server) = run(app);
    let client = reqwest::Client::new();
    signed_post(&client, &url, &bytes(&fixture("text"))).send().await.unwrap();
    started.notified().await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();

    // The server closed its pool on the way out; reopen to look.
    let reopened = db.reopen().await;
    let replies = reopened.list_outbound(tenant.id).await.unwrap();
    assert_eq!(replies.len(), 1);
    assert_eq!(reopened.count_jobs(tenant.id).await.unwrap(), 1);
    let jobs = reopened.jobs_of_conversation(tenant.id, ConversationId(replies[0].conversation_id)).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].state, "completed", "the in-flight turn finished: {:?}", jobs[0]);
    assert_eq!(jobs[0].attempts, 1);
    assert!(jobs[0].locked_by.is_none() && jobs[0].last_error.is_none(), "{:?}", jobs[0]);
    reopened.close().await;
});

/// Panics on its first turn, as a bug in a handler would.
struct PanicsOnce {
    replier: Replier,
    panicked: std::sync::atomic::AtomicBool,
}

#[async_trait]
impl TurnHandler for PanicsOnce {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        if !self.panicked.swap(true, std::sync::atomic::Ordering::SeqCst) {
            panic!("a bug in a turn handler");
        }
        self.replier.reply(turn, 0, OutboundMessage::text("Pronto!")?);
        Ok(())
    }
}

// With one worker, a panic that killed it for good would leave every later turn unanswered.
contract!(a_worker_that_panics_is_restarted, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let mut config = test_config(
        &graph.url,
        &[
            ("BALCAO_WORKERS", "1"),
            ("BALCAO_JOB_LEASE_SECONDS", "3"),
            ("BALCAO_JOB_BACKOFF_BASE_MS", "10"),
            ("BALCAO_DEBOUNCE_MS", "0"),
            ("BALCAO_DEBOUNCE_MAX_MS", "0"),
        ],
    );
    config.whatsapp.access_token = None; // keep the reply local: this is about the worker
    let app = App::build_with(config, db.store.clone(), move |ctx| {
        Arc::new(PanicsOnce { replier: ctx.replier, panicked: Default::default() })
    })
    .await
    .unwrap();
    let (url, stop, server) = run(app);
    let client = reqwest::Client::new();
    signed_post(&client, &url, &bytes(&fixture("text"))).send().await.unwrap();
    // The turn's lease runs out, maintenance returns it to the queue, the restarted worker
    // answers it.
    wait_for("the turn to be answered after the panic", async || {
        !db.store.list_outbound(tenant.id).await.unwrap().is_empty()
    })
    .await;
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
    let reopened = db.reopen().await;
    let replies = reopened.list_outbound(tenant.id).await.unwrap();
    let jobs = reopened.jobs_of_conversation(tenant.id, ConversationId(replies[0].conversation_id)).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].state.as_str(), jobs[0].attempts), ("completed", 2), "{:?}", jobs[0]);
    reopened.close().await;
});
