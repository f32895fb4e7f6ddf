//! Booking deposits on both databases: a service with a deposit is booked `held`, the sweep
//! sends its Pix once; paying it confirms the booking; a hold that runs out frees the slot and
//! tells the customer once; a deposit paid after that confirms the slot if it is still free,
//! and otherwise alerts the merchant to refund, never overlapping two bookings.

use balcao::domain::{Cents, TenantId};
use balcao::ledger::Outcome;
use balcao::money::charges::{Charge, PaidOutcome, mark_paid};
use balcao::money::deposits::{DepositRequests, expire_due};
use balcao::store::{BookingStore, ChargeStore, OutboxStore};
use balcao::whatsapp::OutboundMessage;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

use crate::contract;
use crate::support::common::{TestDb, sandbox_gateways};
use crate::support::scenario::{Customer, LEASE, STAFF, Scenario, local_replier, merchant_file, next_weekday_at_14h};

const ANA: &str = "5511999990001";
const BETO: &str = "5511999990002";

/// The merchant's tenant whose "Corte masculino" (R$ 50,00) asks for a 40% deposit.
fn deposit_file() -> String {
    merchant_file().replacen("buffer_minutes = 10\n", "buffer_minutes = 10\ndeposit = \"40%\"\n", 1)
}

async fn book(s: &Scenario, c: &Customer, start: &str) -> Outcome {
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": start });
    s.call_at(c, "create_booking", input, Utc::now()).await
}

/// Books `start` for `c` and runs the deposit sweep: the booking (held) and its charge.
async fn book_held(db: &TestDb, s: &Scenario, c: &Customer, start: &str) -> (Value, Charge) {
    let booked = match book(s, c, start).await {
        Outcome::Executed(v) => v,
        other => panic!("booking failed: {other:?}"),
    };
    let requests = DepositRequests::new(db.store.clone(), local_replier(db), sandbox_gateways(), LEASE);
    assert_eq!(requests.request_due(Utc::now()).await.unwrap(), 1);
    assert_eq!(requests.request_due(Utc::now()).await.unwrap(), 0, "one charge per hold");
    let id = booked["booking_id"].as_i64().unwrap();
    let charges = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 100).await.unwrap();
    let charge = charges.into_iter().find(|c| c.appointment_id == Some(id)).expect("the deposit charge");
    (booked, charge)
}

async fn inbox(db: &TestDb, tenant: TenantId, wa_id: &str) -> Vec<OutboundMessage> {
    db.store.outbound_for_wa_id(tenant, wa_id, 0).await.unwrap().into_iter().map(|r| r.message.0).collect()
}

async fn told(db: &TestDb, tenant: TenantId, wa_id: &str, needle: &str) -> usize {
    inbox(db, tenant, wa_id).await.iter().filter(|m| m.body().contains(needle)).count()
}

async fn status(db: &TestDb, s: &Scenario, booked: &Value) -> String {
    let id = booked["booking_id"].as_i64().unwrap();
    db.store.appointment(s.tenant.id, id).await.unwrap().unwrap().status
}

/// Past every hold made now.
fn after_the_hold() -> DateTime<Utc> {
    Utc::now() + TimeDelta::minutes(31)
}

contract!(a_deposit_paid_in_time_confirms_the_booking, |db| async move {
    let s = Scenario::from_file(db, &deposit_file()).await;
    let ana = s.customer(db, ANA).await;
    let beto = s.customer(db, BETO).await;
    let start = next_weekday_at_14h();
    let (booked, charge) = book_held(db, &s, &ana, &start).await;

    // Held, saying what is due and by when; the slot is taken while held.
    assert_eq!(booked["status"], "held", "{booked}");
    assert_eq!(booked["deposit"]["amount"], "20.00", "{booked}");
    let held = db.store.appointment(s.tenant.id, booked["booking_id"].as_i64().unwrap()).await.unwrap().unwrap();
    let pay_by = held.hold_expires_at.expect("a hold");
    assert!(pay_by > Utc::now() + TimeDelta::minutes(29) && pay_by <= Utc::now() + TimeDelta::minutes(30));
    match book(&s, &beto, &start).await {
        Outcome::Failed { details, .. } => assert_eq!(details["reason"], "slot_taken"),
        other => panic!("a held slot was booked again: {other:?}"),
    }

    // The charge: the deposit, lapsing with the hold, its code in the customer's messages.
    assert_eq!((charge.amount(), charge.status.as_str()), (Cents(2000), "pending"));
    assert_eq!(charge.expires_at, pay_by);
    assert!(charge.action_id.is_none() && charge.merchant_conversation_id.is_none());
    let code = balcao::pix::decode(&charge.copia_e_cola).expect("a valid BR Code");
    assert_eq!(code.amount(), Some(Cents(2000)));
    let messages = inbox(db, s.tenant.id, ANA).await;
    assert!(messages.iter().any(|m| m.body() == charge.copia_e_cola), "{messages:?}");
    assert!(messages.iter().any(|m| m.body().contains("pague o sinal de R$ 20,00")), "{messages:?}");

    // Paid (twice: a redelivery): confirmed once, each party told once.
    let paid = mark_paid(&db.store, &local_replier(db), &s.tenant, charge.id, None).await.unwrap();
    assert!(matches!(paid, PaidOutcome::Paid(_)), "{paid:?}");
    let again = mark_paid(&db.store, &local_replier(db), &s.tenant, charge.id, None).await.unwrap();
    assert!(matches!(again, PaidOutcome::Unchanged(_)), "{again:?}");
    let confirmed = db.store.appointment(s.tenant.id, held.id).await.unwrap().unwrap();
    assert_eq!((confirmed.status.as_str(), confirmed.hold_expires_at), ("confirmed", None));
    assert_eq!(told(db, s.tenant.id, ANA, "está confirmado").await, 1);
    assert_eq!(told(db, s.tenant.id, STAFF, "Sinal pago: R$ 20,00").await, 1);

    // A confirmed booking does not run out.
    assert_eq!(expire_due(&db.store, &local_replier(db), after_the_hold()).await.unwrap(), 0);
    assert_eq!(status(db, &s, &booked).await, "confirmed");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(a_hold_that_runs_out_frees_the_slot_and_tells_the_customer_once, |db| async move {
    let s = Scenario::from_file(db, &deposit_file()).await;
    let ana = s.customer(db, ANA).await;
    let beto = s.customer(db, BETO).await;
    let start = next_weekday_at_14h();
    let (booked, charge) = book_held(db, &s, &ana, &start).await;

    assert_eq!(expire_due(&db.store, &local_replier(db), Utc::now()).await.unwrap(), 0, "not yet");
    assert_eq!(expire_due(&db.store, &local_replier(db), after_the_hold()).await.unwrap(), 1);
    assert_eq!(expire_due(&db.store, &local_replier(db), after_the_hold()).await.unwrap(), 0, "once");
    assert_eq!(status(db, &s, &booked).await, "expired");
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "expired");
    assert_eq!(told(db, s.tenant.id, ANA, "o horário foi liberado").await, 1);
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);
    // Gone from the customer's bookings.
    let mine = match s.call_at(&ana, "list_my_bookings", json!({}), Utc::now()).await {
        Outcome::Executed(v) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(mine["bookings"], json!([]), "{mine}");

    // The slot is free: another customer books it.
    match book(&s, &beto, &start).await {
        Outcome::Executed(v) => assert_eq!(v["status"], "held", "{v}"),
        other => panic!("the released slot could not be booked: {other:?}"),
    }
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(a_deposit_paid_after_the_hold_confirms_a_slot_still_free, |db| async move {
    let s = Scenario::from_file(db, &deposit_file()).await;
    let ana = s.customer(db, ANA).await;
    let (booked, charge) = book_held(db, &s, &ana, &next_weekday_at_14h()).await;
    assert_eq!(expire_due(&db.store, &local_replier(db), after_the_hold()).await.unwrap(), 1);

    let paid = mark_paid(&db.store, &local_replier(db), &s.tenant, charge.id, None).await.unwrap();
    assert!(matches!(paid, PaidOutcome::Paid(_)), "{paid:?}");
    assert_eq!(status(db, &s, &booked).await, "confirmed");
    assert_eq!(told(db, s.tenant.id, ANA, "está confirmado").await, 1);
    assert_eq!(told(db, s.tenant.id, STAFF, "Devolva o valor").await, 0);
});

contract!(a_deposit_paid_after_the_slot_was_taken_alerts_the_merchant, |db| async move {
    let s = Scenario::from_file(db, &deposit_file()).await;
    let ana = s.customer(db, ANA).await;
    let beto = s.customer(db, BETO).await;
    let start = next_weekday_at_14h();
    let (booked, charge) = book_held(db, &s, &ana, &start).await;
    assert_eq!(expire_due(&db.store, &local_replier(db), after_the_hold()).await.unwrap(), 1);
    let (taken, _) = book_held(db, &s, &beto, &start).await;

    // Ana's Pix arrives late, twice (a redelivered notification).
    let late = mark_paid(&db.store, &local_replier(db), &s.tenant, charge.id, None).await.unwrap();
    assert!(matches!(&late, PaidOutcome::RefundDue(c) if c.status == "refund_due"), "{late:?}");
    let again = mark_paid(&db.store, &local_replier(db), &s.tenant, charge.id, None).await.unwrap();
    assert!(matches!(again, PaidOutcome::Unchanged(_)), "{again:?}");

    assert_eq!(status(db, &s, &booked).await, "expired");
    assert_eq!(status(db, &s, &taken).await, "held");
    assert_eq!(told(db, s.tenant.id, STAFF, "envio os botões para devolver o valor").await, 1);
    // Its refund is offered to the staff with buttons, once.
    let replier = local_replier(db);
    assert_eq!(balcao::actions::offer_due_refunds(&db.store, &replier, Utc::now()).await.unwrap(), 1);
    assert_eq!(balcao::actions::offer_due_refunds(&db.store, &replier, Utc::now()).await.unwrap(), 0);
    assert_eq!(told(db, s.tenant.id, STAFF, "que já não valia mais").await, 1);
    assert_eq!(told(db, s.tenant.id, ANA, "vai devolver o valor").await, 1);
    assert_eq!(told(db, s.tenant.id, ANA, "está confirmado").await, 0);
    // Exactly one active booking at that time.
    let at = DateTime::parse_from_rfc3339(&start).unwrap().with_timezone(&Utc);
    let busy = db.store.busy_blocks(s.tenant.id, at, at + TimeDelta::minutes(40)).await.unwrap();
    assert_eq!(busy.len(), 1, "{busy:?}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

contract!(cancelling_a_held_booking_cancels_its_deposit_charge, |db| async move {
    let s = Scenario::from_file(db, &deposit_file()).await;
    let ana = s.customer(db, ANA).await;
    let (booked, charge) = book_held(db, &s, &ana, &next_weekday_at_14h()).await;
    let answer = s.cancel(&ana, &booked["booking_id"]).await;
    assert_eq!(answer["status"], "executed", "{answer}");
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "cancelled");
    // Nothing is left to run out.
    assert_eq!(expire_due(&db.store, &local_replier(db), after_the_hold()).await.unwrap(), 0);
});
