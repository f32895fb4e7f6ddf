//! Races of real tasks against a real database, on both backends.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use balcao::jobs::{Replier, RunOutcome, Turn, TurnHandler};
use balcao::outbox::SendOutcome;
use balcao::store::{InboundStore, JobStore, OutboxStore, TurnTiming};
use balcao::whatsapp::OutboundMessage;
use chrono::{TimeDelta, Utc};

use crate::contract;
use crate::support::common::{TestApp, test_config};
use crate::support::fake_graph::FakeGraph;
use crate::support::payloads::{bytes, fixture};
use crate::support::queue::{record, timing};

contract!(fifty_concurrent_deliveries_store_one_message_one_turn_one_reply, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let app = Arc::new(TestApp::spawn(db, test_config(&graph.url, &[])).await);
    let body = Arc::new(bytes(&fixture("text")));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let (app, body) = (app.clone(), body.clone());
        tasks.spawn(async move { app.post_webhook(&body).await.status().as_u16() });
    }
    while let Some(status) = tasks.join_next().await {
        assert_eq!(status.unwrap(), 200);
    }
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 1);
    assert_eq!(db.store.count_jobs(tenant.id).await.unwrap(), 1);
    assert_eq!(app.metrics.inbound_duplicate.get(), 49);

    // Several workers and senders race over the result too.
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let app = app.clone();
        runs.spawn(async move { app.drain_turns().await });
    }
    let mut completed = 0;
    while let Some(outcomes) = runs.join_next().await {
        completed += outcomes.unwrap().iter().filter(|o| matches!(o, RunOutcome::Completed(_))).count();
    }
    assert_eq!(completed, 1);
    let mut sends = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let app = app.clone();
        sends.spawn(async move { app.drain_outbox().await });
    }
    while sends.join_next().await.is_some() {}
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap().len(), 1);
    let sent = graph.sends();
    assert_eq!(sent.len(), 1, "one reply reached WhatsApp");
    assert_eq!(sent[0].body["to"], "+16505551234");
    assert!(sent[0].body["interactive"]["body"]["text"].as_str().unwrap().starts_with("Olá, Sheena Nelson!"));
});

contract!(eight_workers_never_claim_a_job_twice, |db| async move {
    let tenant = db.tenant().await;
    let now = Utc::now();
    let t: TurnTiming = timing(0, 0, 5);
    for i in 0..400 {
        record(&db.store, &tenant, &format!("m{i}"), &format!("55119{i:08}"), &t, now).await;
    }
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..8 {
        let store = db.store.clone();
        workers.spawn(async move {
            let mut claimed = Vec::new();
            while let Some(job) = store.claim_next(&format!("w{w}"), now, now + TimeDelta::seconds(60)).await.unwrap() {
                claimed.push(job.id);
                assert!(store.complete(&job.lease, now).await.unwrap());
            }
            claimed
        });
    }
    let mut all = Vec::new();
    let mut busy_workers = 0;
    while let Some(claimed) = workers.join_next().await {
        let claimed = claimed.unwrap();
        busy_workers += usize::from(!claimed.is_empty());
        all.extend(claimed);
    }
    let distinct: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 400, "every job claimed exactly once");
    assert_eq!(distinct.len(), 400);
    assert!(busy_workers > 1, "the race had more than one participant");
});

contract!(one_running_turn_per_conversation_under_contention, |db| async move {
    let tenant = db.tenant().await;
    let now = Utc::now();
    let t = timing(0, 0, 5);
    // 20 conversations, each with a running-turn-to-be and a follow-up turn.
    for c in 0..20 {
        let phone = format!("55118{c:08}");
        record(&db.store, &tenant, &format!("c{c}-a"), &phone, &t, now).await;
    }
    let first: Vec<_> = {
        let mut v = Vec::new();
        while let Some(j) = db.store.claim_next("setup", now, now + TimeDelta::seconds(60)).await.unwrap() {
            v.push(j);
        }
        v
    };
    assert_eq!(first.len(), 20);
    for c in 0..20 {
        record(&db.store, &tenant, &format!("c{c}-b"), &format!("55118{c:08}"), &t, now).await;
    }
    let mut racers = tokio::task::JoinSet::new();
    for w in 0..8 {
        let store = db.store.clone();
        racers
            .spawn(async move { store.claim_next(&format!("r{w}"), now, now + TimeDelta::seconds(60)).await.unwrap() });
    }
    while let Some(j) = racers.join_next().await {
        assert!(j.unwrap().is_none(), "a follow-up turn ran while its conversation was busy");
    }
});

/// First attempt: queues its reply, then hangs as a dying worker would. Later attempts
/// behave.
struct DiesMidTurn {
    replier: Replier,
    calls: std::sync::atomic::AtomicUsize,
    /// Notified once the first attempt has queued its reply.
    replied: Arc<tokio::sync::Notify>,
}

#[async_trait]
impl TurnHandler for DiesMidTurn {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        self.replier.reply(turn, 0, OutboundMessage::text("Recebido!")?);
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            self.replied.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

contract!(a_worker_killed_mid_turn_is_retried_and_answers_once, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let replied = Arc::new(tokio::sync::Notify::new());
    let signal = replied.clone();
    let app = TestApp::spawn_with(db, test_config(&graph.url, &[]), |ctx| {
        Arc::new(DiesMidTurn { replier: ctx.replier, calls: Default::default(), replied: signal })
    })
    .await;
    assert_eq!(app.post_webhook(&bytes(&fixture("text"))).await.status(), 200);
    let start = Utc::now() + TimeDelta::seconds(10);

    let doomed = app.worker.clone();
    let task = tokio::spawn(async move { doomed.run_next_at(start).await });
    // Wait until the doomed worker has queued its reply, then kill it: the turn never ended,
    // so nothing of it was written.
    replied.notified().await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(db.store.list_outbound(tenant.id).await.unwrap().is_empty(), "a dead turn writes no reply");

    // Nothing happens until the lease expires; then the turn is reclaimed and rerun.
    assert_eq!(app.worker.run_next_at(start).await.unwrap(), RunOutcome::Empty);
    let after_lease = start + TimeDelta::seconds(31);
    app.worker.maintain_at(after_lease).await.unwrap();
    let rerun = app.worker.run_next_at(after_lease).await.unwrap();
    assert!(matches!(rerun, RunOutcome::Completed(_)), "{rerun:?}");

    let outbox = db.store.list_outbound(tenant.id).await.unwrap();
    assert_eq!(outbox.len(), 1);
    let sends = app.drain_outbox().await;
    assert!(matches!(sends.as_slice(), [SendOutcome::Sent { .. }]), "{sends:?}");
    assert_eq!(graph.sends().len(), 1);
    let job = db
        .store
        .jobs_of_conversation(tenant.id, balcao::domain::ConversationId(outbox[0].conversation_id))
        .await
        .unwrap();
    assert_eq!((job[0].state.as_str(), job[0].attempts), ("completed", 2));
});
