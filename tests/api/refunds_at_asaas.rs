//! Refunds at a real provider's wire format (Asaas, against its loopback fake), on both
//! databases: a refund Asaas accepts for processing is settled by its notification (or by the
//! poll) and each party is told once; duplicate clicks make one refund at Asaas; a refund whose
//! answer was lost, and whose click then gave up, is finished by the refund sweep, which looks
//! it up and does not make it again.

use std::sync::Arc;

use balcao::actions::{ConfirmedVia, ExecuteAction, RefundSweep};
use balcao::domain::{ClickId, Decision, JobId};
use balcao::ledger::{CallContext, Executor, Outcome};
use balcao::money::charges::Charge;
use balcao::money::refunds::Refunds;
use balcao::pix::Gateways;
use balcao::store::{ActionStore, ChargeStore, Decider, InboundStore, RefundStore};
use chrono::{TimeDelta, Utc};
use serde_json::json;

use crate::contract;
use crate::support::clicks::{CUSTOMER, ask_refund, button, inbox, last_buttons, post, propose_charge, told};
use crate::support::common::{TestApp, TestDb};
use crate::support::fake_asaas::{FakeAsaas, Fault, Route, WEBHOOK_TOKEN};
use crate::support::payloads::text;
use crate::support::scenario::{STAFF, Scenario, app_on_asaas, asaas_file, asaas_secrets, local_replier};

/// An Asaas notification about `payment`.
async fn notify(app: &TestApp, event_id: &str, event: &str, payment: &str) {
    let status = app
        .http
        .post(format!("{}/webhooks/pix/barbearia/asaas", app.url))
        .header("asaas-access-token", WEBHOOK_TOKEN)
        .json(&json!({ "id": event_id, "event": event, "dateCreated": "2026-12-04 10:00:00",
                       "payment": { "object": "payment", "id": payment } }))
        .send()
        .await
        .expect("notification")
        .status();
    assert_eq!(status, reqwest::StatusCode::OK);
}

fn gateways() -> Arc<Gateways> {
    Arc::new(Gateways::new(asaas_secrets()))
}

async fn process(db: &TestDb) -> usize {
    let gateways = Gateways::new(asaas_secrets());
    balcao::money::payments::process_due(&db.store, &local_replier(db), &gateways).await.unwrap()
}

/// An Asaas tenant (with `pix` settings added), a customer who wrote today, and her R$ 50,00
/// charge, paid at Asaas and recorded paid here.
async fn paid_at_asaas(db: &TestDb, pix: &str) -> (FakeAsaas, Scenario, TestApp, Charge) {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake).replace("[pix]\n", &format!("[pix]\n{pix}"))).await;
    let app = app_on_asaas(db).await;
    post(&app, CUSTOMER, text("wamid.a.0", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let confirm = propose_charge(db, &app, &s, "p").await;
    post(&app, STAFF, button(STAFF, "wamid.p.click", &confirm)).await;
    app.drain_turns().await;
    let charge = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 1).await.unwrap().remove(0);
    let payment = charge.provider_ref.clone().expect("an Asaas payment");
    fake.update(&payment, json!({ "status": "RECEIVED" }));
    notify(&app, "evt_paid", "PAYMENT_RECEIVED", &payment).await;
    assert_eq!(process(db).await, 1);
    let charge = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    assert_eq!(charge.status, "paid");
    (fake, s, app, charge)
}

contract!(an_asaas_refund_is_settled_by_its_notification_and_told_once, |db| async move {
    let (fake, s, app, charge) = paid_at_asaas(db, "").await;
    let payment = charge.provider_ref.clone().unwrap();
    let offer = ask_refund(db, &app, &s, charge.id, Some("20,00"), "r").await;
    let confirm = last_buttons(&[offer])[0].clone();
    // Tapped twice on one phone and once on another.
    for wamid in ["wamid.r.click", "wamid.r.click", "wamid.r.other"] {
        post(&app, STAFF, button(STAFF, wamid, &confirm)).await;
    }
    app.drain_turns().await;
    let at_asaas = fake.refunds_of(&payment);
    assert_eq!(at_asaas.len(), 1, "one refund at Asaas: {at_asaas:?}");
    assert_eq!((at_asaas[0]["value"].clone(), at_asaas[0]["status"].clone()), (json!(20.0), json!("PENDING")));
    let refunds = db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap();
    assert_eq!((refunds.len(), refunds[0].status.as_str()), (1, "processing"));
    assert_eq!(told(&inbox(db, s.tenant.id, STAFF).await, "pedida ao provedor de Pix"), 1);
    assert_eq!(told(&inbox(db, s.tenant.id, CUSTOMER).await, "devolveu"), 0, "not done yet");

    // Asaas finishes it and says so, twice; the poll runs too.
    fake.settle_refunds(&payment, "DONE");
    notify(&app, "evt_refund", "PAYMENT_PARTIALLY_REFUNDED", &payment).await;
    notify(&app, "evt_refund", "PAYMENT_PARTIALLY_REFUNDED", &payment).await;
    assert_eq!(process(db).await, 1, "stored once");
    let refunds_sweep = Refunds::new(db.store.clone(), local_replier(db), gateways());
    refunds_sweep.sweep(Utc::now()).await.unwrap();
    let now = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    assert_eq!((now.status.as_str(), now.refunded_cents), ("partially_refunded", 2000));
    assert_eq!(told(&inbox(db, s.tenant.id, CUSTOMER).await, "devolveu R$ 20,00"), 1);
    assert_eq!(told(&inbox(db, s.tenant.id, STAFF).await, "Devolução feita: R$ 20,00"), 1);

    // The rest, settled by the poll alone (its notification lost).
    let offer = ask_refund(db, &app, &s, charge.id, None, "t").await;
    assert!(offer.body().contains("Devolver R$ 30,00"), "{offer:?}");
    post(&app, STAFF, button(STAFF, "wamid.t.click", &last_buttons(&[offer])[0])).await;
    app.drain_turns().await;
    fake.settle_refunds(&payment, "DONE");
    refunds_sweep.sweep(Utc::now()).await.unwrap();
    refunds_sweep.sweep(Utc::now()).await.unwrap();
    let now = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    assert_eq!((now.status.as_str(), now.refunded_cents), ("refunded", 5000));
    assert_eq!(fake.refunds_of(&payment).len(), 2);
    assert_eq!(told(&inbox(db, s.tenant.id, CUSTOMER).await, "devolveu R$ 30,00"), 1);
    assert_eq!(told(&inbox(db, s.tenant.id, STAFF).await, "Devolução feita: R$ 30,00"), 1);
});

contract!(an_asaas_refund_whose_answer_was_lost_is_made_once, |db| async move {
    let (fake, s, app, charge) = paid_at_asaas(db, "timeout_seconds = 1\nlookup_margin_seconds = 0\n").await;
    let payment = charge.provider_ref.clone().unwrap();
    let offer = ask_refund(db, &app, &s, charge.id, None, "l").await;
    let click = ClickId::parse(&last_buttons(&[offer])[0]).unwrap();
    let action = db.store.action(s.tenant.id, click.action).await.unwrap().unwrap();
    let merchant = db.store.conversation_contact(s.tenant.id, action.conversation).await.unwrap().contact_id;
    let by = Decider {
        tenant: s.tenant.id,
        conversation: action.conversation,
        contact: merchant,
        staff: true,
        via: ConfirmedVia::Button,
        message: "wamid.l.click",
        simulator: None,
    };
    assert!(db.store.decide_action(click.action, Decision::Confirm, &by, Utc::now()).await.unwrap());

    // Asaas makes the refund and its answer never comes back.
    fake.fail(Route::RefundPayment, Fault::ActThenHang);
    let tool = ExecuteAction {
        store: db.store.clone(),
        replier: local_replier(db),
        gateways: Arc::new(Gateways::new(asaas_secrets())),
    };
    let executor = Executor::new(db.store.clone(), std::time::Duration::from_secs(10));
    let input = json!({ "action_id": click.action.to_string() });
    let ctx = |attempt| CallContext {
        turn: Some(JobId(1)),
        turn_attempt: Some(attempt),
        trigger_message_id: Some("wamid.l.click"),
        ..CallContext::outside_turn(&s.tenant, merchant, action.conversation, Utc::now())
    };
    let first = executor.execute(&tool, &ctx(1), &input).await.unwrap();
    assert!(matches!(first, Outcome::Retryable { .. }), "{first:?}");
    assert_eq!(fake.refunds_of(&payment).len(), 1, "made at Asaas, answer lost");

    // The click's job gives up there. The refund sweep finishes the call: it looks the refund up
    // first (after the lost request's timeout) and sends nothing.
    let sweep = RefundSweep::new(db.store.clone(), local_replier(db), gateways(), std::time::Duration::from_secs(10));
    assert_eq!(sweep.resume(Utc::now()).await.unwrap(), 0, "not before it may be abandoned");
    assert_eq!(sweep.resume(Utc::now() + TimeDelta::minutes(2)).await.unwrap(), 1);
    assert_eq!(sweep.resume(Utc::now() + TimeDelta::minutes(2)).await.unwrap(), 0, "settled: replayed only");
    assert_eq!(fake.refunds_of(&payment).len(), 1, "one refund at Asaas");
    let refunds = db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap();
    assert_eq!((refunds.len(), refunds[0].amount_cents, refunds[0].status.as_str()), (1, 5000, "processing"));
    let action = db.store.action(s.tenant.id, click.action).await.unwrap().unwrap();
    assert_eq!(action.status, balcao::actions::ActionStatus::Executed);
    // Asaas finishes it; the poll records it.
    fake.settle_refunds(&payment, "DONE");
    Refunds::new(db.store.clone(), local_replier(db), gateways()).sweep(Utc::now()).await.unwrap();
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "refunded");
    let _ = app;
});
