//! Local mode is decided at start and holds for the process: nothing is sent, whatever
//! tenants change while it runs, and it listens on loopback unless explicitly opened.

use balcao::app::App;
use balcao::jobs::RunOutcome;
use balcao::store::OutboxStore;

use crate::contract;
use crate::support::common::{PHONE_NUMBER_ID, TestApp, local_test_config, test_config};
use crate::support::fake_graph::FakeGraph;
use crate::support::payloads::{bytes, fixture};

// The development secret is public: if a token applied at run time made a local-mode server
// send, anyone could make it message customers through the real number.
contract!(local_mode_never_sends_after_a_tenant_gains_a_token, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let app = TestApp::spawn(db, local_test_config(&graph.url, &[])).await;
    // `balcao tenant apply` with an access token while the server runs.
    let updated = db.tenant_with(PHONE_NUMBER_ID, "barbearia", Some("EAAG-tenant-token")).await;
    assert_eq!(updated.id, tenant.id);
    assert!(updated.access_token.is_some());

    assert_eq!(app.post_webhook(&bytes(&fixture("text"))).await.status(), 200);
    let outcomes = app.drain_turns().await;
    assert!(matches!(outcomes.as_slice(), [RunOutcome::Completed(_)]), "{outcomes:?}");
    assert!(app.drain_outbox().await.is_empty());
    let rows = db.store.list_outbound(tenant.id).await.unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.status == "local"), "{:?}", rows.iter().map(|r| &r.status).collect::<Vec<_>>());
    assert!(graph.sends().is_empty());
});

// Rows queued for sending by an earlier run outside local mode wait for such a run again.
contract!(the_outbox_sender_sends_nothing_in_local_mode, |db| async move {
    let tenant = db.tenant().await;
    let graph = FakeGraph::start().await;
    let live = TestApp::spawn(db, test_config(&graph.url, &[])).await;
    assert_eq!(live.post_webhook(&bytes(&fixture("text"))).await.status(), 200);
    live.drain_turns().await;
    let pending = db.store.list_outbound(tenant.id).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].status, "pending");

    let local = TestApp::spawn(db, local_test_config(&graph.url, &[])).await;
    db.tenant_with(PHONE_NUMBER_ID, "barbearia", Some("EAAG-tenant-token")).await;
    assert!(local.drain_outbox().await.is_empty());
    assert!(graph.sends().is_empty());
    assert_eq!(db.store.list_outbound(tenant.id).await.unwrap()[0].status, "pending");
});

contract!(local_mode_listens_on_a_public_address_only_when_told_to, |db| async move {
    let public = ("BALCAO_ADDR", "0.0.0.0:0");
    let refused = App::build(local_test_config("http://127.0.0.1:9", &[public]), db.store.clone()).await;
    let error = format!("{:#}", refused.err().expect("local mode on 0.0.0.0 started"));
    assert!(error.contains("BALCAO_LOCAL_MODE_PUBLIC=1") && error.contains("0.0.0.0"), "{error}");

    let opted_in = [public, ("BALCAO_LOCAL_MODE_PUBLIC", "1")];
    assert!(App::build(local_test_config("http://127.0.0.1:9", &opted_in), db.store.clone()).await.is_ok());
    // With a real App Secret the address is the operator's choice.
    assert!(App::build(test_config("http://127.0.0.1:9", &[public]), db.store.clone()).await.is_ok());
});
