//! Charges withdrawn at their provider (Asaas, against its loopback fake), on both databases: a
//! deposit whose hold ran out and one whose booking was cancelled are deleted at Asaas once,
//! however often the sweep runs; one paid meanwhile is not deleted and takes the paid path; the
//! console cancels a pending charge with one click (a second does nothing).

use std::sync::Arc;

use balcao::config::PixSecrets;
use balcao::domain::{Cents, PayerDocument};
use balcao::jobs::Replier;
use balcao::ledger::Outcome;
use balcao::money::charges::{Charge, Withdrawals};
use balcao::money::deposits::{DepositRequests, expire_due};
use balcao::pix::Gateways;
use balcao::store::{BookingStore, ChargeStore};
use chrono::{Datelike, TimeDelta, Utc, Weekday};
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{CUSTOMER, PAYER_DOCUMENT, button, inbox, post, propose_charge};
use crate::support::common::{TestApp, TestDb, local_test_config};
use crate::support::console::Console;
use crate::support::fake_asaas::{FakeAsaas, Route};
use crate::support::payloads::text;
use crate::support::scenario::{Customer, LEASE, STAFF, Scenario, asaas_file, asaas_secrets};

fn replier(db: &TestDb) -> Replier {
    Replier::new(db.store.clone(), None, true, Arc::new(tokio::sync::Notify::new()))
}

fn withdrawals(db: &TestDb) -> Withdrawals {
    Withdrawals::new(db.store.clone(), replier(db), Arc::new(Gateways::new(asaas_secrets())), LEASE)
}

fn deletes(fake: &FakeAsaas) -> usize {
    fake.seen().iter().filter(|s| s.route == Route::DeletePayment).count()
}

/// 14:00 in São Paulo on a weekday at least two days ahead.
fn next_weekday_at_14h() -> String {
    let tz = chrono_tz::America::Sao_Paulo;
    let mut day = Utc::now().with_timezone(&tz).date_naive() + TimeDelta::days(2);
    while matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
        day += TimeDelta::days(1);
    }
    format!("{}T14:00:00-03:00", day.format("%Y-%m-%d"))
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
    let requests = DepositRequests::new(db.store.clone(), replier(db), Arc::new(Gateways::new(asaas_secrets())), LEASE);
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

    assert_eq!(expire_due(&db.store, &replier(db), Utc::now() + TimeDelta::minutes(31)).await.unwrap(), 1);
    assert_eq!(status_of(db, &s, charge.id).await, "expired");
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(w.withdraw_due(Utc::now()).await.unwrap(), 0, "withdrawn once");
    assert_eq!(deletes(&fake), 1);
    assert_eq!(fake.payments()[0]["deleted"], true, "nobody can pay it at Asaas any more");
    assert_eq!(status_of(db, &s, charge.id).await, "expired");
});

contract!(a_deposit_paid_before_its_withdrawal_is_not_deleted_and_confirms_the_slot, |db| async move {
    let fake = FakeAsaas::start().await;
    let (s, ana) = deposit_tenant(db, &fake).await;
    let (booked, charge) = book_held(db, &s, &ana).await;
    assert_eq!(expire_due(&db.store, &replier(db), Utc::now() + TimeDelta::minutes(31)).await.unwrap(), 1);
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

contract!(the_console_cancels_a_pending_charge_at_its_provider_once, |db| async move {
    let fake = FakeAsaas::start().await;
    let s = Scenario::from_file(db, &asaas_file(&fake)).await;
    let mut config = local_test_config("http://127.0.0.1:9", &[]);
    config.pix_secrets = PixSecrets(asaas_secrets());
    let app = TestApp::spawn(db, config).await;
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
    let first = console.post(&cancel, &[]).await;
    assert_eq!(first.location.as_deref(), Some(format!("/admin/{}/charges?ok=cancelled", s.tenant.slug).as_str()));
    let second = console.post(&cancel, &[]).await;
    assert_eq!(second.location.as_deref(), Some(format!("/admin/{}/charges?ok=not_pending", s.tenant.slug).as_str()));
    assert_eq!((deletes(&fake), status_of(db, &s, charge.id).await.as_str()), (1, "cancelled"));
    assert_eq!(withdrawals(db).withdraw_due(Utc::now()).await.unwrap(), 0, "withdrawn already");
    let shown = console.get(&format!("/admin/{}/charges?ok=cancelled", s.tenant.slug)).await;
    assert!(shown.body.contains("Cobrança cancelada"), "{}", shown.body);
});
