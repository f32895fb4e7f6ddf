//! The outbox sender against a loopback Graph API: success, retries, permanent failures, lost
//! responses resolved by status webhooks, and local mode.

use balcao::outbox::SendOutcome;
use balcao::store::OutboxStore;
use chrono::{TimeDelta, Utc};

use crate::contract;
use crate::support::common::{ACCESS_TOKEN, TestApp, TestDb, test_config};
use crate::support::fake_graph::{FakeGraph, Reply};
use crate::support::payloads::{bytes, fixture, status_payload};

/// A tenant, an app on the fake Graph API, and one acknowledged turn waiting in the outbox.
async fn one_reply_queued(db: &TestDb, extra: &[(&str, &str)]) -> (TestApp, FakeGraph, balcao::tenant::Tenant) {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let app = TestApp::spawn(db, test_config(&graph.url, extra)).await;
    assert_eq!(app.post_webhook(&bytes(&fixture("text"))).await.status(), 200);
    assert_eq!(app.drain_turns().await.len(), 1);
    (app, graph, tenant)
}

contract!(a_reply_is_sent_with_token_key_and_documented_shape, |db| async move {
    let (app, graph, tenant) = one_reply_queued(db, &[]).await;
    let outcomes = app.drain_outbox().await;
    assert!(
        matches!(outcomes.as_slice(), [SendOutcome::Sent { wamid }] if *wamid == app.privacy_key.message_id("wamid.FAKE000001")),
        "{outcomes:?}"
    );
    let sends = graph.sends();
    assert_eq!(sends.len(), 1);
    let send = &sends[0];
    assert_eq!(send.phone_number_id, crate::support::common::PHONE_NUMBER_ID);
    assert_eq!(send.authorization.as_deref(), Some(format!("Bearer {ACCESS_TOKEN}").as_str()));
    assert_eq!(send.body["messaging_product"], "whatsapp");
    // The guided menu: reply buttons in the documented shape.
    assert_eq!(send.body["type"], "interactive");
    assert_eq!(send.body["interactive"]["type"], "button");
    assert_eq!(send.body["interactive"]["action"]["buttons"][0]["reply"]["id"], "g:book");
    let rows = db.store.list_outbound(tenant.id).await.unwrap();
    assert_eq!(send.body["biz_opaque_callback_data"], rows[0].idempotency_key.as_str());
    assert!(rows[0].idempotency_key.starts_with("turn:"));
    assert_eq!(
        (rows[0].status.as_str(), rows[0].provider_message_id.as_deref()),
        ("sent", Some(app.privacy_key.message_id("wamid.FAKE000001").as_str()))
    );
    assert_eq!(app.metrics.outbox_sent.get(), 1);

    // Statuses move it forward only.
    for (status, expect) in [("delivered", "delivered"), ("read", "read"), ("delivered", "read"), ("sent", "read")] {
        assert_eq!(app.post_webhook(&bytes(&status_payload("wamid.FAKE000001", status, None))).await.status(), 200);
        assert_eq!(db.store.list_outbound(tenant.id).await.unwrap()[0].status, expect);
    }
});

contract!(rate_limits_and_server_errors_are_retried_with_backoff, |db| async move {
    let (app, graph, tenant) = one_reply_queued(db, &[]).await;
    graph.script([Reply::Error(429, 130429), Reply::Status(502), Reply::Error(400, 131056)]);
    let now = Utc::now();
    assert_eq!(app.sender.send_next_at(now).await.unwrap(), SendOutcome::WillRetry);
    let row = &db.store.list_outbound(tenant.id).await.unwrap()[0];
    assert_eq!(row.status, "pending");
    assert!(row.last_error.as_deref().unwrap().contains("130429"));
    assert_eq!(app.sender.send_next_at(now).await.unwrap(), SendOutcome::Empty, "backing off");
    let later = now + TimeDelta::minutes(10);
    assert_eq!(app.sender.send_next_at(later).await.unwrap(), SendOutcome::WillRetry);
    assert_eq!(app.sender.send_next_at(later + TimeDelta::minutes(10)).await.unwrap(), SendOutcome::WillRetry);
    let sent = app.sender.send_next_at(later + TimeDelta::minutes(20)).await.unwrap();
    assert!(matches!(sent, SendOutcome::Sent { .. }), "{sent:?}");
    assert_eq!(graph.sends().len(), 4);
    let row = &db.store.list_outbound(tenant.id).await.unwrap()[0];
    assert_eq!((row.status.as_str(), row.attempts), ("sent", 4));
    assert_eq!(app.metrics.outbox_retried.get(), 3);
});

contract!(outside_the_window_fails_permanently_with_the_reason, |db| async move {
    let (app, graph, tenant) = one_reply_queued(db, &[]).await;
    graph.script([Reply::Error(400, 131047)]);
    let outcome = app.sender.send_next().await.unwrap();
    assert!(matches!(&outcome, SendOutcome::Failed { reason } if reason.contains("24-hour")), "{outcome:?}");
    let row = &db.store.list_outbound(tenant.id).await.unwrap()[0];
    assert_eq!(row.status, "failed");
    assert!(row.last_error.as_deref().unwrap().contains("131047"));
    assert_eq!(app.sender.send_next_at(Utc::now() + TimeDelta::days(1)).await.unwrap(), SendOutcome::Empty);
    assert_eq!(graph.sends().len(), 1);
    assert_eq!(app.metrics.outbox_failed.get(), 1);
});

contract!(retries_stop_at_the_attempt_limit, |db| async move {
    let (app, graph, tenant) = one_reply_queued(db, &[("BALCAO_OUTBOX_MAX_ATTEMPTS", "2")]).await;
    graph.script([Reply::Status(500), Reply::Status(500), Reply::Status(500)]);
    let now = Utc::now();
    assert_eq!(app.sender.send_next_at(now).await.unwrap(), SendOutcome::WillRetry);
    let last = app.sender.send_next_at(now + TimeDelta::hours(1)).await.unwrap();
    assert!(
        matches!(&last, SendOutcome::Failed { reason } if reason.starts_with("gave up after 2 attempts")),
        "{last:?}"
    );
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap()[0].status, "failed");
    assert_eq!(graph.sends().len(), 2);
});

contract!(a_lost_response_is_resolved_by_the_status_webhook, |db| async move {
    let (app, graph, tenant) = one_reply_queued(db, &[]).await;
    graph.script([Reply::Hang]);
    let now = Utc::now();
    assert_eq!(app.sender.send_next_at(now).await.unwrap(), SendOutcome::Unknown);
    let key = db.store.list_outbound(tenant.id).await.unwrap()[0].idempotency_key.clone();
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap()[0].status, "unknown");
    // Within the grace period nothing is resent.
    assert_eq!(app.sender.send_next_at(now + TimeDelta::seconds(30)).await.unwrap(), SendOutcome::Empty);
    // Meta reports the message it did send, carrying our key.
    let status = status_payload("wamid.ARRIVED", "sent", Some(&key));
    assert_eq!(app.post_webhook(&bytes(&status)).await.status(), 200);
    let row = &db.store.list_outbound(tenant.id).await.unwrap()[0];
    assert_eq!(
        (row.status.as_str(), row.provider_message_id.as_deref()),
        ("sent", Some(app.privacy_key.message_id("wamid.ARRIVED").as_str()))
    );
    // Long after the grace period: still not resent.
    assert_eq!(app.sender.send_next_at(now + TimeDelta::hours(1)).await.unwrap(), SendOutcome::Empty);
    assert_eq!(graph.sends().len(), 1);
});

contract!(a_lost_response_without_a_status_is_resent_after_the_grace, |db| async move {
    let (app, graph, tenant) = one_reply_queued(db, &[("BALCAO_OUTBOX_GRACE_SECONDS", "60")]).await;
    graph.script([Reply::Hang]);
    let now = Utc::now();
    assert_eq!(app.sender.send_next_at(now).await.unwrap(), SendOutcome::Unknown);
    assert_eq!(app.sender.send_next_at(now + TimeDelta::seconds(59)).await.unwrap(), SendOutcome::Empty);
    let resent = app.sender.send_next_at(now + TimeDelta::seconds(61)).await.unwrap();
    assert!(matches!(resent, SendOutcome::Sent { .. }), "{resent:?}");
    let sends = graph.sends();
    assert_eq!(sends.len(), 2);
    assert_eq!(sends[0].body["biz_opaque_callback_data"], sends[1].body["biz_opaque_callback_data"]);
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap()[0].status, "sent");
});

contract!(without_an_access_token_replies_stay_local, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let mut config = test_config(&graph.url, &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;
    assert_eq!(app.post_webhook(&bytes(&fixture("text"))).await.status(), 200);
    app.drain_turns().await;
    assert!(app.drain_outbox().await.is_empty());
    let rows = db.store.list_outbound(tenant.id).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, "local");
    assert!(graph.sends().is_empty());

    // A tenant token overrides the missing global one.
    let other = db.tenant_with("200200200", "outra", Some("EAAG-tenant-token")).await;
    let body = crate::support::payloads::envelope(
        "200200200",
        "5511977776666",
        vec![crate::support::payloads::text("wamid.t2", "5511977776666", "oi")],
    );
    assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
    app.drain_turns().await;
    assert_eq!(app.drain_outbox().await.len(), 1);
    let sends = graph.sends();
    assert_eq!(sends[0].authorization.as_deref(), Some("Bearer EAAG-tenant-token"));
    assert_eq!(sends[0].phone_number_id, "200200200");
    assert_eq!(db.store.list_outbound(other.id).await.unwrap()[0].status, "sent");
});

// Several senders in one process (`BALCAO_OUTBOX_SENDERS`) claim rows the way several processes
// do: racing, every row goes out once, and one conversation's rows keep their order.
contract!(senders_racing_send_each_row_once_in_conversation_order, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let app = TestApp::spawn(db, test_config(&graph.url, &[])).await;
    let customers: Vec<String> = (0..6).map(|c| format!("55119888800{c:02}")).collect();
    for round in 0..2 {
        for (c, customer) in customers.iter().enumerate() {
            let body = crate::support::payloads::envelope(
                crate::support::common::PHONE_NUMBER_ID,
                customer,
                vec![crate::support::payloads::text(&format!("wamid.race.{round}.{c}"), customer, "oi")],
            );
            assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
        }
        app.drain_turns().await;
    }
    let rows = db.store.list_outbound(tenant.id).await.unwrap();
    assert!(rows.len() >= 12, "a reply per turn: {}", rows.len());

    let senders = (0..8).map(|_| {
        let sender = app.sender.clone();
        tokio::spawn(async move { while sender.send_next().await.unwrap() != SendOutcome::Empty {} })
    });
    for sender in futures::future::join_all(senders).await {
        sender.unwrap();
    }
    assert!(app.drain_outbox().await.is_empty(), "nothing left behind");

    let keys: Vec<String> =
        graph.sends().iter().map(|s| s.body["biz_opaque_callback_data"].as_str().unwrap().to_owned()).collect();
    let unique: std::collections::HashSet<&String> = keys.iter().collect();
    assert_eq!((keys.len(), unique.len()), (rows.len(), rows.len()), "each row sent once");
    for conversation in rows.iter().map(|r| r.conversation_id).collect::<std::collections::BTreeSet<_>>() {
        let queued: Vec<&str> =
            rows.iter().filter(|r| r.conversation_id == conversation).map(|r| r.idempotency_key.as_str()).collect();
        let sent: Vec<&str> = keys.iter().map(String::as_str).filter(|k| queued.contains(k)).collect();
        assert_eq!(sent, queued, "conversation {conversation} in order");
    }
    assert!(db.store.list_outbound(tenant.id).await.unwrap().iter().all(|r| r.status == "sent"));
});

/// PostgreSQL only: SQLite lives on one machine, with one clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_reply_is_sent_at_once_by_a_server_whose_clock_is_behind() {
    let Some(db) = TestDb::postgres().await else { return };
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    crate::support::queue::record(
        &db.store,
        &tenant,
        "wamid.behind",
        "5511999990001",
        &crate::support::queue::timing(0, 0, 5),
        Utc::now(),
    )
    .await;
    // This server's clock reads two minutes behind the database's. A turn's end stamps its
    // replies on the database's clock, so the sender must read that clock too, or it would
    // see the reply as due two minutes from now.
    let store = db.reopen().await;
    let behind = TimeDelta::minutes(2);
    let skew = store.sync_clock_with(|| Utc::now() - behind).await.unwrap();
    assert!((skew - behind).abs() < TimeDelta::seconds(5), "measured {skew}");
    let app = balcao::app::App::build(test_config(&graph.url, &[]), store).await.unwrap();
    assert!(matches!(app.worker().run_next().await.unwrap(), balcao::jobs::RunOutcome::Completed(_)));
    let sent = app.sender().send_next().await.unwrap();
    assert!(matches!(sent, SendOutcome::Sent { .. }), "{sent:?}");
    assert_eq!(graph.sends().len(), 1);
    db.cleanup().await;
}
