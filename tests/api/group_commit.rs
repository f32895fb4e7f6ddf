//! Group commit at the intake: concurrent writes share transactions, duplicates stay one row,
//! and a failing write does not fail its batch-mates.

use std::sync::Arc;
use std::time::Duration;

use balcao::config::IntakeConfig;
use balcao::domain::ConversationId;
use balcao::inbound::GroupCommit;
use balcao::metrics::Metrics;
use balcao::store::{ConversationRef, InboundStore, IntakeStore, IntakeWrite, JobKind, JobStore, Recorded, Written};
use chrono::Utc;

use crate::contract;
use crate::support::queue::{message, timing};

fn settings(batch_max: usize, window_ms: u64, writers: usize) -> IntakeConfig {
    IntakeConfig { batch_max, batch_window: Duration::from_millis(window_ms), writers }
}

/// `balcao_intake_batch_size_{count,sum}` from the exposition: (batches, writes).
fn batches(metrics: &Metrics) -> (u64, u64) {
    let text = metrics.render();
    let value = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<f64>().ok())).unwrap_or(0.0) as u64
    };
    (value("balcao_intake_batch_size_count "), value("balcao_intake_batch_size_sum "))
}

contract!(concurrent_duplicates_in_shared_batches_are_stored_once, |db| async move {
    let tenant = db.tenant().await;
    let metrics = Metrics::new();
    let writer =
        GroupCommit::start(db.store.clone(), Arc::new(timing(600, 600, 5)), metrics.clone(), &settings(16, 5, 3));
    // 120 messages from 12 customers, each delivered twice at the same moment.
    let mut conversations = Vec::new();
    for c in 0..12 {
        let wa_id = format!("55119999{c:05}");
        let conversation =
            db.store.ensure_conversation(tenant.id, &message("probe", &wa_id).contact, Utc::now()).await.unwrap();
        conversations.push((wa_id, ConversationRef::Known(conversation)));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..120 {
        let (wa_id, conversation) = conversations[i % 12].clone();
        for _ in 0..2 {
            let (writer, wa_id) = (writer.clone(), wa_id.clone());
            let write = IntakeWrite::Message {
                tenant: tenant.id,
                conversation: conversation.clone(),
                message: message(&format!("wamid.gc{i}"), &wa_id),
                kind: JobKind::Turn,
            };
            tasks.spawn(async move { writer.write(write).await });
        }
    }
    let (mut new, mut duplicates) = (0, 0);
    while let Some(result) = tasks.join_next().await {
        match result.unwrap().unwrap() {
            Written::Message(Recorded::New { .. }) => new += 1,
            Written::Message(Recorded::Duplicate) => duplicates += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((new, duplicates), (120, 120));
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 120);
    // One pending turn per conversation, holding all of its messages.
    assert_eq!(db.store.count_jobs(tenant.id).await.unwrap(), 12);
    let (batches, writes) = batches(&metrics);
    assert_eq!(writes, 240);
    assert!(batches < 240, "{batches} commits for 240 writes: nothing was grouped");
});

contract!(a_failing_write_fails_alone_and_its_batch_mates_are_stored, |db| async move {
    let tenant = db.tenant().await;
    let metrics = Metrics::new();
    // A long window and one writer: the eleven writes below share one batch.
    let writer =
        GroupCommit::start(db.store.clone(), Arc::new(timing(600, 600, 5)), metrics.clone(), &settings(64, 300, 1));
    let conversation =
        db.store.ensure_conversation(tenant.id, &message("probe", "5511988880001").contact, Utc::now()).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..11 {
        // The sixth names a conversation that does not exist: the database refuses it.
        let conversation = ConversationRef::Known(if i == 5 { ConversationId(i64::MAX / 2) } else { conversation });
        let write = IntakeWrite::Message {
            tenant: tenant.id,
            conversation,
            message: message(&format!("wamid.bad{i}"), "5511988880001"),
            kind: JobKind::Turn,
        };
        let writer = writer.clone();
        tasks.spawn(async move { (i, writer.write(write).await) });
    }
    let mut failed = Vec::new();
    while let Some(result) = tasks.join_next().await {
        let (i, result) = result.unwrap();
        match result {
            Ok(Written::Message(Recorded::New { .. })) => {}
            Err(_) => failed.push(i),
            other => panic!("write {i}: {other:?}"),
        }
    }
    assert_eq!(failed, vec![5]);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 10);
    let split = metrics.render().lines().any(|l| l == "balcao_intake_batches_split_total 1");
    assert!(split, "the batch should have failed once and been retried alone:\n{}", metrics.render());
});

contract!(without_group_commit_each_write_commits_alone, |db| async move {
    let tenant = db.tenant().await;
    let metrics = Metrics::new();
    let writer =
        GroupCommit::start(db.store.clone(), Arc::new(timing(600, 600, 5)), metrics.clone(), &settings(1, 0, 1));
    let conversation =
        db.store.ensure_conversation(tenant.id, &message("probe", "5511977770001").contact, Utc::now()).await.unwrap();
    let write = |wamid: &str| IntakeWrite::Message {
        tenant: tenant.id,
        conversation: ConversationRef::Known(conversation),
        message: message(wamid, "5511977770001"),
        kind: JobKind::Turn,
    };
    let (a, b) = tokio::join!(writer.write(write("wamid.solo")), writer.write(write("wamid.solo")));
    let mut outcomes = [a.unwrap(), b.unwrap()];
    outcomes.sort_by_key(|w| matches!(w, Written::Message(Recorded::Duplicate)));
    assert!(matches!(outcomes[0], Written::Message(Recorded::New { .. })));
    assert_eq!(outcomes[1], Written::Message(Recorded::Duplicate));
    assert_eq!(batches(&metrics), (2, 2));
});

contract!(one_batch_mixes_messages_repeats_and_clicks_in_order, |db| async move {
    let tenant = db.tenant().await;
    let t = timing(600, 600, 5);
    let conversation = |wa_id: &'static str| {
        let store = db.store.clone();
        async move { store.ensure_conversation(tenant.id, &message("probe", wa_id).contact, Utc::now()).await.unwrap() }
    };
    let (ana, bia) = (conversation("5511966660001").await, conversation("5511966660002").await);
    let text = |wamid: &str, conversation, wa_id| IntakeWrite::Message {
        tenant: tenant.id,
        conversation: ConversationRef::Known(conversation),
        message: message(wamid, wa_id),
        kind: JobKind::Turn,
    };
    let mut click = message("wamid.click", "5511966660001");
    click.content = balcao::whatsapp::InboundContent::ButtonReply { id: "a:1:ok".into(), title: "Sim".into() };
    let writes = [
        text("wamid.a1", ana, "5511966660001"),
        text("wamid.b1", bia, "5511966660002"),
        text("wamid.a1", ana, "5511966660001"),
        IntakeWrite::Message {
            tenant: tenant.id,
            conversation: ConversationRef::Known(ana),
            message: click,
            kind: JobKind::Click,
        },
        text("wamid.a2", ana, "5511966660001"),
    ];
    let refs: Vec<&IntakeWrite> = writes.iter().collect();
    let written = db.store.write_intake_batch(&refs, &t, Utc::now()).await.unwrap();
    let job = |w: &Written| match w {
        Written::Message(Recorded::New { job, .. }) => Some(*job),
        _ => None,
    };
    let jobs: Vec<_> = written.iter().map(job).collect();
    assert!(jobs[0].is_some() && jobs[1].is_some() && jobs[3].is_some() && jobs[4].is_some(), "{written:?}");
    assert_eq!(written[2], Written::Message(Recorded::Duplicate));
    // Ana's two texts feed one turn; Bia's is another; the click has a job of its own.
    assert_eq!(jobs[0], jobs[4]);
    assert_ne!(jobs[0], jobs[1]);
    assert_ne!(jobs[3], jobs[0]);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 4);
    // The same batch again stores nothing.
    let again = db.store.write_intake_batch(&refs, &t, Utc::now()).await.unwrap();
    assert!(again.iter().all(|w| *w == Written::Message(Recorded::Duplicate)), "{again:?}");
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 4);
});

contract!(a_conversations_messages_keep_their_order_across_batches_and_writers, |db| async move {
    let tenant = db.tenant().await;
    // Small batches and several writers: a body of 40 messages spans ten batches.
    let writer = GroupCommit::start(db.store.clone(), Arc::new(timing(0, 0, 5)), Metrics::new(), &settings(4, 0, 4));
    let wa_id = "5511955550001";
    let conversation =
        db.store.ensure_conversation(tenant.id, &message("probe", wa_id).contact, Utc::now()).await.unwrap();
    let ids: Vec<String> = (0..40).map(|i| format!("wamid.order{i:02}")).collect();
    let writes = ids
        .iter()
        .map(|id| IntakeWrite::Message {
            tenant: tenant.id,
            conversation: ConversationRef::Known(conversation),
            message: message(id, wa_id),
            kind: JobKind::Turn,
        })
        .collect();
    assert!(writer.write_all(writes).await.iter().all(Result::is_ok));
    let now = Utc::now() + chrono::TimeDelta::seconds(1);
    let job = db.store.claim_next("w", now, now + chrono::TimeDelta::minutes(1)).await.unwrap().expect("a turn");
    let stored: Vec<String> =
        db.store.turn_messages(tenant.id, job.id).await.unwrap().into_iter().map(|m| m.provider_message_id).collect();
    assert_eq!(stored, ids);
});

contract!(a_first_message_creates_its_contact_in_its_own_commit, |db| async move {
    let tenant = db.tenant().await;
    let t = Arc::new(timing(600, 600, 5));
    let contacts = || async {
        crate::raw_pool!(db, pool => sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM contacts c JOIN conversations v ON v.contact_id = c.id WHERE c.tenant_id = $1"
        )
        .bind(tenant.id.0)
        .fetch_one(&pool)
        .await
        .unwrap())
    };
    // Alone: a new customer's first message is one commit, contact and conversation included.
    let writer = GroupCommit::start(db.store.clone(), t.clone(), Metrics::new(), &settings(1, 0, 1));
    let first = message("wamid.first", "5511944440001");
    let conversation = db.store.resolve_conversation(tenant.id, &first.contact).await.unwrap();
    assert!(matches!(conversation, ConversationRef::Upsert(_)), "{conversation:?}");
    let commits = db.store.sqlite_commits();
    let write = IntakeWrite::Message { tenant: tenant.id, conversation, message: first.clone(), kind: JobKind::Turn };
    let Written::Message(Recorded::New { conversation: stored, .. }) = writer.write(write).await.unwrap() else {
        panic!("the first message was not stored");
    };
    if let (Some(before), Some(after)) = (commits, db.store.sqlite_commits()) {
        assert_eq!(after - before, 1, "a first message should commit once");
    }
    assert_eq!(db.store.resolve_conversation(tenant.id, &first.contact).await.unwrap(), ConversationRef::Known(stored));

    // In batches: eight new customers' first three messages, each delivered twice, all looked
    // up before any is stored, so every write carries its contact's upsert.
    let writer = GroupCommit::start(db.store.clone(), t, Metrics::new(), &settings(16, 5, 3));
    let mut senders = tokio::task::JoinSet::new();
    for c in 0..8 {
        let wa_id = format!("55119444{:05}", c + 10);
        let mut writes = Vec::new();
        for i in 0..3 {
            let m = message(&format!("wamid.new{c}.{i}"), &wa_id);
            for _ in 0..2 {
                let conversation = db.store.resolve_conversation(tenant.id, &m.contact).await.unwrap();
                assert!(matches!(conversation, ConversationRef::Upsert(_)));
                writes.push(IntakeWrite::Message {
                    tenant: tenant.id,
                    conversation,
                    message: m.clone(),
                    kind: JobKind::Turn,
                });
            }
        }
        let writer = writer.clone();
        senders.spawn(async move { writer.write_all(writes).await });
    }
    while let Some(results) = senders.join_next().await {
        let mut conversations = std::collections::BTreeSet::new();
        let (mut new, mut duplicates) = (0, 0);
        for result in results.unwrap() {
            match result.unwrap() {
                Written::Message(Recorded::New { conversation, .. }) => {
                    new += 1;
                    conversations.insert(conversation);
                }
                Written::Message(Recorded::Duplicate) => duplicates += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!((new, duplicates, conversations.len()), (3, 3, 1));
    }
    assert_eq!(contacts().await, 9);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 25);
    assert_eq!(db.store.count_jobs(tenant.id).await.unwrap(), 9);
});
