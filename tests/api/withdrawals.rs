//! Charges withdrawn at their provider (Asaas, against its loopback fake), on both databases: a
//! deposit whose hold ran out and one whose booking was cancelled are deleted at Asaas once,
//! however often the sweep runs; one paid meanwhile is not deleted and takes the paid path; the
//! console cancels a pending charge once, however many tabs click; a charge found after an
//! unknown outcome once its hold ended is recorded, closed and withdrawn.

use std::sync::Arc;

use balcao::domain::{Cents, PayerDocument};
use balcao::ledger::Outcome;
use balcao::money::charges::{Charge, Withdrawals};
use balcao::money::deposits::{DepositRequests, expire_due};
use balcao::pix::Gateways;
use balcao::store::{BookingStore, ChargeStore};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{CUSTOMER, PAYER_DOCUMENT, button, inbox, post, propose_charge};
use crate::support::common::TestDb;
use crate::support::console::Console;
use crate::support::fake_asaas::{FakeAsaas, Route};
use crate::support::payloads::text;
use crate::support::scenario::{
    Customer, LEASE, STAFF, Scenario, app_on_asaas, asaas_file, asaas_secrets, local_replier, next_weekday_at_14h,
};

fn withdrawals(db: &TestDb) -> Withdrawals {
    Withdrawals::new(db.store.clone(), local_replier(db), Arc::new(Gateways::new(asaas_secrets())), LEASE)
}

fn deletes(fake: &FakeAsaas) -> usize {
    fake.seen().iter().filter(|s| s.route == Route::DeletePayment).count()
}

/// An Asaas tenant whose "Corte masculino" asks for a 40% deposit, and a customer with a CPF.
async fn deposit_tenant(db: &TestDb, fake: &FakeAsaas) -> (Scenario, Customer) {
    let file = asaas_file(fake).replacen("buffer_minutes = 10\n", "buffer_minutes = 10\ndeposit = \"40%\"\n", 1);
    let s = Scenario::from_file(db, &file).await;
    let ana = s.customer(db, CUSTOMER).await;
    let cpf = PayerDocument::parse(PAYER_DOCUMENT).unwrap();
    db.store.set_payer_document(s.tenant.id, ana.contact, &cpf, Utc::now()).await.unwrap();
    (s, ana)
}

/// Books the deposit service for `ana` and sends its charge: the booking and the charge.
async fn book_held(db: &TestDb, s: &Scenario, ana: &Customer) -> (Value, Charge) {
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": next_weekday_at_14h() });
    let booked = match s.call_at(ana, "create_booking", input, Utc::now()).await {
        Outcome::Executed(v) => v,
        other => panic!("booking failed: {other:?}"),
    };
    let requests =
        DepositRequests::new(db.store.clone(), local_replier(db), Arc::new(Gateways::new(asaas_secrets())), LEASE);
    assert_eq!(requests.request_due(Utc::now()).await.unwrap(), 1);
    let charges = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 10).await.unwrap();
    (booked, charges.into_iter().next().expect("the deposit charge"))
}

async fn status_of(db: &TestDb, s: &Scenario, id: i64) -> String {
    db.store.charge(s.tenant.id, id).await.unwrap().unwrap().status
}

contract!(an_expired_hold_withdraws_its_deposit_at_asaas_once, |db| async move {
    let fake = FakeAsaas::start().await;
    let (s, ana) = deposit_tenant(db, &fake).await;
    let (_, charge) = book_held(db, &s, &ana).await;
    let w = withdrawals(db);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 0, "a pending charge is not withdrawn by the sweep");

    assert_eq!(expire_due(&db.store, &local_replier(db), Utc::now() + TimeDelta::minutes(31)).await.unwrap(), 1);
    assert_eq!(status_of(db, &s, charge.id).await, "expired");
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 0, "withdrawn once");
    assert_eq!(deletes(&fake), 1);
    assert_eq!(fake.payments()[0]["deleted"], true, "nobody can pay it at Asaas any more");
    let id = fake.payments()[0]["id"].as_str().unwrap().to_owned();
    assert!(!fake.receive(&id), "the fake takes no payment for it either");
    assert_eq!(status_of(db, &s, charge.id).await, "expired");

    // A worker that died after marking the charge but before settling its ledger row left the
    // row running, its lease out: the charge no longer looks due, and the sweep finishes it.
    let unsettle =
        "UPDATE agent_tool_executions SET status = 'running', locked_until = $1 WHERE tool = 'cancel_charge'";
    let past = Utc::now() - TimeDelta::minutes(1);
    crate::raw_pool!(db, pool => sqlx::query(unsettle).bind(past).execute(&pool).await.unwrap().rows_affected());
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 1);
    let settled = "SELECT COUNT(*) FROM agent_tool_executions WHERE tool = 'cancel_charge' AND status = 'succeeded'";
    let settled = crate::raw_pool!(db, pool => sqlx::query_scalar::<_, i64>(settled).fetch_one(&pool).await.unwrap());
    assert_eq!(settled, 1);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 0);
});

contract!(a_deposit_paid_before_its_withdrawal_is_not_deleted_and_confirms_the_slot, |db| async move {
    let fake = FakeAsaas::start().await;
    let (s, ana) = deposit_tenant(db, &fake).await;
    let (booked, charge) = book_held(db, &s, &ana).await;
    assert_eq!(expire_due(&db.store, &local_replier(db), Utc::now() + TimeDelta::minutes(31)).await.unwrap(), 1);
    // The customer paid at Asaas just as the hold ran out; no notification came yet.
    fake.update(charge.provider_ref.as_deref().unwrap(), json!({ "status": "RECEIVED" }));

    assert_eq!(withdrawals(db).withdraw_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(fake.payments()[0]["deleted"], false, "a payment is never deleted");
    assert_eq!(status_of(db, &s, charge.id).await, "paid");
    let appointment = db.store.appointment(s.tenant.id, booked["booking_id"].as_i64().unwrap()).await.unwrap();
    assert_eq!(appointment.unwrap().status, "confirmed", "the slot was still free");
    let told = inbox(db, s.tenant.id, CUSTOMER).await.iter().filter(|m| m.body().contains("Recebemos o sinal")).count();
    assert_eq!(told, 1);
});

contract!(cancelling_a_held_booking_withdraws_its_deposit_at_asaas, |db| async move {
    let fake = FakeAsaas::start().await;
    let (s, ana) = deposit_tenant(db, &fake).await;
    let (booked, charge) = book_held(db, &s, &ana).await;
    let cancelled = s.cancel(&ana, &booked["booking_id"]).await;
    assert!(cancelled.to_string().contains("cancel"), "{cancelled}");
    assert_eq!(status_of(db, &s, charge.id).await, "cancelled");

    let w = withdrawals(db);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 0);
    assert_eq!((deletes(&fake), fake.payments()[0]["deleted"].clone()), (1, json!(true)));
});

contract!(a_charge_paid_after_it_expired_here_is_not_deleted_and_the_merchant_is_told, |db| async move {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake)).await;
    let app = app_on_asaas(db).await;
    post(&app, CUSTOMER, text("wamid.l.0", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let confirm = propose_charge(db, &app, &s, "l").await;
    post(&app, STAFF, button(STAFF, "wamid.l.click", &confirm)).await;
    app.drain_turns().await;
    let charge = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 1).await.unwrap().remove(0);
    // The poller found it overdue at Asaas; the customer paid the overdue payment anyway.
    assert!(db.store.close_charge(s.tenant.id, charge.id, "expired", Utc::now()).await.unwrap());
    fake.update(charge.provider_ref.as_deref().unwrap(), json!({ "status": "RECEIVED" }));

    let w = withdrawals(db);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 0, "not asked again");
    assert_eq!((deletes(&fake), fake.payments()[0]["deleted"].clone()), (1, json!(false)), "refused: it was received");
    let alerts =
        inbox(db, s.tenant.id, STAFF).await.iter().filter(|m| m.body().contains("chegou um pagamento")).count();
    assert_eq!(alerts, 1, "the merchant is told to check and refund");
});

contract!(a_deposit_found_after_its_hold_ended_is_recorded_and_withdrawn, |db| async move {
    use crate::support::fake_asaas::Fault;

    let fake = FakeAsaas::start().await;
    let timing = "[pix]\ntimeout_seconds = 1\nlookup_margin_seconds = 0\n";
    let file = asaas_file(&fake)
        .replacen("buffer_minutes = 10\n", "buffer_minutes = 10\ndeposit = \"40%\"\n", 1)
        .replace("[pix]\n", timing);
    let s = Scenario::from_file(db, &file).await;
    let ana = s.customer(db, CUSTOMER).await;
    let cpf = PayerDocument::parse(PAYER_DOCUMENT).unwrap();
    db.store.set_payer_document(s.tenant.id, ana.contact, &cpf, Utc::now()).await.unwrap();
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": next_weekday_at_14h() });
    let booked = s.call_at(&ana, "create_booking", input, Utc::now()).await;
    assert!(matches!(booked, Outcome::Executed(_)), "booking failed: {booked:?}");

    let requests =
        DepositRequests::new(db.store.clone(), local_replier(db), Arc::new(Gateways::new(asaas_secrets())), LEASE);
    // Asaas makes the payment; its answer never comes.
    fake.fail(Route::CreatePayment, Fault::ActThenHang);
    assert_eq!(requests.request_due(Utc::now()).await.unwrap(), 0, "the outcome is unknown");
    // The next sweep comes after the hold lapsed: the hold is no longer due, but the call left
    // unsettled is finished; the payment is found, recorded and closed, untold.
    let after_the_hold = Utc::now() + TimeDelta::minutes(31);
    assert_eq!(requests.request_due(after_the_hold).await.unwrap(), 1);
    assert_eq!(requests.request_due(after_the_hold).await.unwrap(), 0, "settled now");
    let charges = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 10).await.unwrap();
    assert_eq!((charges.len(), charges[0].status.as_str()), (1, "expired"));
    assert_eq!(fake.payments().len(), 1, "found, not created again");
    assert!(!inbox(db, s.tenant.id, CUSTOMER).await.iter().any(|m| m.body().contains("pague o sinal")));
    assert_eq!(withdrawals(db).withdraw_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(fake.payments()[0]["deleted"], true);
});

contract!(the_console_cancels_a_pending_charge_at_its_provider_once, |db| async move {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake)).await;
    let app = app_on_asaas(db).await;
    post(&app, CUSTOMER, text("wamid.w.0", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let confirm = propose_charge(db, &app, &s, "w").await;
    post(&app, STAFF, button(STAFF, "wamid.w.click", &confirm)).await;
    app.drain_turns().await;
    let charge = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 1).await.unwrap().remove(0);
    assert_eq!((charge.status.as_str(), charge.amount()), ("pending", Cents(5000)));

    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let page = console.get(&format!("/admin/{}/charges", s.tenant.slug)).await;
    assert!(page.body.contains("Cancelar cobrança"), "{}", page.body);
    let cancel = format!("/admin/{}/charges/{}/cancel", s.tenant.slug, charge.id);
    // Two tabs click at once: the ledger lets one cancellation through.
    let (first, second) = futures::future::join(console.post(&cancel, &[]), console.post(&cancel, &[])).await;
    let mut answers = [first.location.unwrap_or_default(), second.location.unwrap_or_default()];
    answers.sort();
    let at = |ok: &str| format!("/admin/{}/charges?ok={ok}", s.tenant.slug);
    assert!(answers.contains(&at("cancelled")), "{answers:?}");
    assert!(answers.iter().all(|a| [at("cancelled"), at("in_progress"), at("not_pending")].contains(a)), "{answers:?}");
    let again = console.post(&cancel, &[]).await;
    assert_eq!(again.location, Some(at("not_pending")));
    assert_eq!((deletes(&fake), status_of(db, &s, charge.id).await.as_str()), (1, "cancelled"));
    assert_eq!(withdrawals(db).withdraw_due(Utc::now()).await.unwrap(), 0, "withdrawn already");
    let shown = console.get(&format!("/admin/{}/charges?ok=cancelled", s.tenant.slug)).await;
    assert!(shown.body.contains("Cobrança cancelada"), "{}", shown.body);
});
