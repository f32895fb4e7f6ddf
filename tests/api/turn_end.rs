//! A turn's end is one fenced transaction: its replies, its history and model calls, and the
//! job's completion land together under the job lease, or not at all.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use balcao::domain::{ConversationId, PhoneE164};
use balcao::jobs::{Replier, RunOutcome, Turn, TurnEnd, TurnHandler, TurnHistory};
use balcao::llm::ChatMessage;
use balcao::outbox::SendOutcome;
use balcao::store::{
    ConversationViewStore, HandoffStore, HistoryStore, JobStore, ModelCall, NewOutbound, OutboxKey, OutboxStore,
};
use balcao::whatsapp::{OutboundMessage, Recipient};
use chrono::{TimeDelta, Utc};

use crate::contract;
use crate::support::common::{TestApp, test_config};
use crate::support::fake_graph::FakeGraph;
use crate::support::payloads::{bytes, fixture};
use crate::support::queue::{record, timing};

/// Stages a reply and the turn's history every time; fails after staging on its first run.
struct StagesThenFails {
    replier: Replier,
    runs: AtomicUsize,
}

#[async_trait]
impl TurnHandler for StagesThenFails {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        self.replier.reply(turn, 0, OutboundMessage::text("Recebido!")?);
        turn.stage_history(TurnHistory {
            provider: "anthropic".into(),
            messages: vec![ChatMessage::user_text("oi")],
            calls: vec![],
        });
        if self.runs.fetch_add(1, Ordering::SeqCst) == 0 {
            anyhow::bail!("failed after staging its reply");
        }
        Ok(())
    }
}

contract!(a_turn_that_fails_after_staging_a_reply_writes_nothing_and_its_retry_sends_once, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let config = test_config(&graph.url, &[("BALCAO_JOB_BACKOFF_BASE_MS", "10")]);
    let app = TestApp::spawn_with(db, config, |ctx| {
        Arc::new(StagesThenFails { replier: ctx.replier, runs: AtomicUsize::new(0) })
    })
    .await;
    assert_eq!(app.post_webhook(&bytes(&fixture("text"))).await.status(), 200);
    let later = Utc::now() + TimeDelta::seconds(60);

    let failed = app.worker.run_next_at(later).await.unwrap();
    let RunOutcome::WillRetry(job) = failed else { panic!("{failed:?}") };
    assert!(db.store.list_outbound(tenant.id).await.unwrap().is_empty(), "no reply from a failed turn");
    assert!(!db.store.turn_recorded(tenant.id, job).await.unwrap(), "no history from a failed turn");

    let retried = app.worker.run_next_at(later + TimeDelta::seconds(60)).await.unwrap();
    assert_eq!(retried, RunOutcome::Completed(job));
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap().len(), 1);
    assert!(db.store.turn_recorded(tenant.id, job).await.unwrap());
    let sends = app.drain_outbox().await;
    assert!(matches!(sends.as_slice(), [SendOutcome::Sent { .. }]), "{sends:?}");
    assert_eq!(graph.sends().len(), 1);
});

/// The end a turn of `job` in `conversation` would stage: one reply, its history, one model call.
fn staged_end(
    tenant: &balcao::tenant::Tenant,
    conversation: ConversationId,
    job: balcao::domain::JobId,
    yields: bool,
) -> TurnEnd {
    let mut end = TurnEnd::empty(tenant.id, conversation);
    end.replies.push(NewOutbound {
        tenant: tenant.id,
        conversation,
        key: OutboxKey::for_turn(job, 0),
        recipient: Recipient { wa_id: Some(PhoneE164::parse("+5511999990001").unwrap()), user_id: None },
        message: OutboundMessage::text("Oi").unwrap(),
        local: true,
        written_by: None,
        unless_handed_off: yields,
    });
    end.history = Some(TurnHistory {
        provider: "anthropic".into(),
        messages: vec![ChatMessage::user_text("oi")],
        calls: vec![ModelCall {
            turn_id: job.0,
            seq: 0,
            provider: "anthropic".into(),
            request_id: None,
            stop_reason: "end_turn".into(),
            latency_ms: 1,
            input_tokens: 1,
            output_tokens: 1,
        }],
    });
    end
}

contract!(a_stale_workers_end_writes_nothing_and_the_new_owners_end_lands, |db| async move {
    let tenant = db.tenant().await;
    let start = Utc::now();
    let (conversation, job) = record(&db.store, &tenant, "wamid.end", "5511999990001", &timing(0, 0, 5), start).await;
    let lease = TimeDelta::seconds(30);
    let a = db.store.claim_next("a", start, start + lease).await.unwrap().unwrap();
    let later = start + lease + TimeDelta::seconds(1);
    db.store.reap_expired(later).await.unwrap();
    let b = db.store.claim_next("b", later, later + lease).await.unwrap().unwrap();
    assert_eq!((a.id, b.id, b.attempt), (job, job, 2));

    let end = staged_end(&tenant, conversation, job, false);
    assert_eq!(db.store.finish_turn(&a.lease, &end, later, later).await.unwrap(), None, "a's lease is gone");
    assert!(db.store.list_outbound(tenant.id).await.unwrap().is_empty());
    assert!(!db.store.turn_recorded(tenant.id, job).await.unwrap());
    assert_eq!(db.store.model_calls_from(tenant.id, conversation, 0).await.unwrap().len(), 0);
    let snapshot = db.store.job(tenant.id, job).await.unwrap().unwrap();
    assert_eq!((snapshot.state.as_str(), snapshot.locked_by.as_deref()), ("running", Some("b")));

    let finished = db.store.finish_turn(&b.lease, &end, later, later).await.unwrap().expect("b holds the lease");
    assert_eq!(finished.to_send, 0, "a local reply is not for the sender");
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap().len(), 1);
    assert!(db.store.turn_recorded(tenant.id, job).await.unwrap());
    assert_eq!(db.store.model_calls_from(tenant.id, conversation, 0).await.unwrap().len(), 1);
    assert_eq!(db.store.job(tenant.id, job).await.unwrap().unwrap().state, "completed");
    // Ended means ended: the same end again (a confused worker) changes nothing.
    assert_eq!(db.store.finish_turn(&b.lease, &end, later, later).await.unwrap(), None);
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap().len(), 1);
});

contract!(a_takeover_before_the_end_drops_the_reply_but_the_turn_still_ends, |db| async move {
    let tenant = db.tenant().await;
    let start = Utc::now();
    let (conversation, job) = record(&db.store, &tenant, "wamid.hand", "5511999990001", &timing(0, 0, 5), start).await;
    let claimed = db.store.claim_next("a", start, start + TimeDelta::seconds(30)).await.unwrap().unwrap();
    // A person takes the conversation while the turn runs.
    assert!(db.store.take_over(tenant.id, conversation, start + TimeDelta::minutes(30)).await.unwrap());

    let end = staged_end(&tenant, conversation, job, true);
    let finished = db
        .store
        .finish_turn(&claimed.lease, &end, start + TimeDelta::seconds(1), start + TimeDelta::seconds(1))
        .await
        .unwrap();
    assert_eq!(finished.map(|f| f.to_send), Some(0));
    assert!(db.store.list_outbound(tenant.id).await.unwrap().is_empty(), "the person has the conversation");
    assert!(db.store.turn_recorded(tenant.id, job).await.unwrap(), "the turn itself ended");
    assert_eq!(db.store.job(tenant.id, job).await.unwrap().unwrap().state, "completed");
});
