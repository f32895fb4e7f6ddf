//! Refunds by button, end to end through signed webhooks, on both databases (sandbox gateway; the
//! providers' own refund contracts are in `pix_psp`): the staff menu's "Devolver um Pix" in full
//! and in parts up to what was paid, duplicate clicks from two devices, two offers racing for
//! the same money, a payment that came too late offered back once, the console's offer, and the
//! menu's "Cancelar cobrança".

use balcao::actions::{ConfirmedVia, ExecuteAction, offer_due_refunds, offer_refund};
use balcao::domain::{ActionId, Cents, ClickId, Decision, TenantId};
use balcao::ledger::{CallContext, Executor, Outcome};
use balcao::money::charges::{Charge, take_payment};
use balcao::store::{ActionStore, ChargeStore, Decider, InboundStore, RefundStore};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{
    CUSTOMER, ask_refund, button, inbox, last_buttons, last_rows, pick, post, propose_charge, told,
};
use crate::support::common::{TestApp, TestDb, local_test_config, sandbox_gateways};
use crate::support::console::Console;
use crate::support::payloads::text;
use crate::support::scenario::{LEASE, STAFF, Scenario, local_replier};

/// A merchant tenant on the sandbox, a customer who wrote today, and a R$ 50,00 charge the
/// merchant sent; paid when `paid`.
async fn charged(db: &TestDb, paid: bool) -> (Scenario, TestApp, Charge) {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    post(&app, CUSTOMER, text("wamid.c.1", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let confirm = propose_charge(db, &app, &s, "m").await;
    post(&app, STAFF, button(STAFF, "wamid.m.click", &confirm)).await;
    app.drain_turns().await;
    let charge = charges(db, s.tenant.id).await.pop().expect("the charge");
    if paid {
        let path = format!("{}/simulator/api/tenants/barbearia/charges/{}/paid", app.url, charge.id);
        let answer: Value = app.http.post(&path).json(&json!({})).send().await.unwrap().json().await.unwrap();
        assert_eq!(answer["paid"], true, "{answer}");
    }
    let charge = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    (s, app, charge)
}

async fn charges(db: &TestDb, tenant: TenantId) -> Vec<Charge> {
    db.store.charges(tenant, None, Utc::now() - TimeDelta::days(1), 100).await.unwrap()
}

contract!(a_paid_charge_is_refunded_by_the_staff_button_once, |db| async move {
    let (s, app, charge) = charged(db, true).await;
    let offer = ask_refund(db, &app, &s, charge.id, None, "r").await;
    assert!(
        offer.body().contains("Devolver R$ 50,00") && offer.body().contains(&format!("nº {}", charge.id)),
        "{offer:?}"
    );
    let confirm = last_buttons(&[offer])[0].clone();
    assert!(ClickId::parse(&confirm).is_some_and(|c| c.decision == Decision::Confirm));
    assert!(db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap().is_empty(), "nothing before the click");
    // A typed "sim" moves no money.
    post(&app, STAFF, text("wamid.r.sim", STAFF, "sim")).await;
    app.drain_turns().await;
    assert!(db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap().is_empty());

    // The same click delivered twice, and tapped again on a second device (another message id).
    for wamid in ["wamid.r.click", "wamid.r.click", "wamid.r.other-phone"] {
        post(&app, STAFF, button(STAFF, wamid, &confirm)).await;
    }
    app.drain_turns().await;
    let refunds = db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap();
    assert_eq!(refunds.len(), 1);
    assert_eq!((refunds[0].status.as_str(), refunds[0].amount_cents), ("done", 5000));
    let now = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    assert_eq!((now.status.as_str(), now.refunded_cents, now.refund_reserved_cents), ("refunded", 5000, 5000));
    let staff = inbox(db, s.tenant.id, STAFF).await;
    assert_eq!(told(&staff, "Devolução feita: R$ 50,00"), 1, "{staff:?}");
    assert_eq!(told(&staff, "já foi confirmado"), 1, "the other device is told it was done");
    assert_eq!(told(&inbox(db, s.tenant.id, CUSTOMER).await, "devolveu R$ 50,00"), 1);

    // Nothing is left to give back.
    post(&app, STAFF, pick(STAFF, "wamid.r.again", "m:refund")).await;
    app.drain_turns().await;
    let again = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(again.body().contains("Não há Pix pago para devolver"), "{again:?}");
});

contract!(partial_refunds_add_up_to_what_was_paid_and_no_more, |db| async move {
    let (s, app, charge) = charged(db, true).await;
    // More than was paid is refused before anything is offered.
    let refused = ask_refund(db, &app, &s, charge.id, Some("60,00"), "x").await;
    assert!(refused.body().contains("só é possível devolver até R$ 50,00"), "{refused:?}");

    for (tag, amount, status) in [("p1", "20,00", "partially_refunded"), ("p2", "30,00", "refunded")] {
        let offer = ask_refund(db, &app, &s, charge.id, Some(amount), tag).await;
        assert!(offer.body().contains(&format!("Devolver R$ {amount}")), "{offer:?}");
        post(&app, STAFF, button(STAFF, &format!("wamid.{tag}.click"), &last_buttons(&[offer])[0])).await;
        app.drain_turns().await;
        assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, status);
    }
    let refunds = db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap();
    let amounts: Vec<(i64, &str)> = refunds.iter().map(|r| (r.amount_cents, r.status.as_str())).collect();
    assert_eq!(amounts, [(2000, "done"), (3000, "done")]);
    let customer = inbox(db, s.tenant.id, CUSTOMER).await;
    assert_eq!((told(&customer, "devolveu R$ 20,00"), told(&customer, "devolveu R$ 30,00")), (1, 1));
});

/// Confirms `action` as the staff member of `s` would by button.
async fn confirm(db: &TestDb, s: &Scenario, action: ActionId, wamid: &str) {
    let pending = db.store.action(s.tenant.id, action).await.unwrap().unwrap();
    let contact = db.store.conversation_contact(s.tenant.id, pending.conversation).await.unwrap().contact_id;
    let by = Decider {
        tenant: s.tenant.id,
        conversation: pending.conversation,
        contact,
        staff: true,
        via: ConfirmedVia::Button,
        message: wamid,
        simulator: None,
    };
    assert!(db.store.decide_action(action, Decision::Confirm, &by, Utc::now()).await.unwrap());
}

contract!(two_offers_racing_for_the_same_money_refund_it_once, |db| async move {
    let (s, _app, charge) = charged(db, true).await;
    let replier = local_replier(db);
    // Two offers of the same charge (the console's and the menu's, say): R$ 50,00 and R$ 40,00.
    for amount in [Cents(5000), Cents(4000)] {
        assert_eq!(offer_refund(&db.store, &replier, &s.tenant, &charge, amount, false, Utc::now()).await.unwrap(), 1);
    }
    let merchant = balcao::domain::ConversationId(charge.merchant_conversation_id.unwrap());
    let pending: Vec<ActionId> = db
        .store
        .actions_of_conversation(s.tenant.id, merchant)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.status == balcao::actions::ActionStatus::Pending && a.kind().as_str() == "refund")
        .map(|a| a.id)
        .collect();
    assert_eq!(pending.len(), 2, "two amounts, two offers");
    for (n, action) in pending.iter().enumerate() {
        confirm(db, &s, *action, &format!("wamid.race.{n}")).await;
    }
    // Both confirmed; both executions race on the database.
    let tool = ExecuteAction { store: db.store.clone(), replier, gateways: sandbox_gateways() };
    let executor = Executor::new(db.store.clone(), LEASE);
    let contact = db.store.conversation_contact(s.tenant.id, merchant).await.unwrap().contact_id;
    let run = |action: ActionId| {
        let (tool, executor, tenant) = (&tool, &executor, &s.tenant);
        async move {
            let ctx = CallContext::outside_turn(tenant, contact, merchant, Utc::now());
            executor.execute(tool, &ctx, &json!({ "action_id": action.to_string() })).await.unwrap()
        }
    };
    let (a, b) = tokio::join!(run(pending[0]), run(pending[1]));
    let executed = [&a, &b].iter().filter(|o| matches!(o, Outcome::Executed(_))).count();
    assert_eq!(executed, 1, "{a:?} / {b:?}");
    // The loser is told why: what is left, or that it was all given back.
    let why =
        |e: &str| e.contains("só é possível devolver até R$ 10,00") || e.contains("já foi devolvido ou está sendo");
    let refused = [&a, &b].iter().any(|o| matches!(o, Outcome::Failed { error, .. } if why(error)));
    assert!(refused, "{a:?} / {b:?}");
    let done: i64 =
        db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap().iter().map(|r| r.amount_cents).sum();
    let now = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    assert!(done == 5000 || done == 4000, "{done}");
    assert_eq!((now.refunded_cents, now.refund_reserved_cents), (done, done));
});

contract!(one_offer_to_two_staff_members_refunds_once, |db| async move {
    let (s, _app, charge) = charged(db, true).await;
    let replier = local_replier(db);
    assert_eq!(offer_refund(&db.store, &replier, &s.tenant, &charge, Cents(2000), false, Utc::now()).await.unwrap(), 1);
    let merchant = balcao::domain::ConversationId(charge.merchant_conversation_id.unwrap());
    let first = db.store.actions_of_conversation(s.tenant.id, merchant).await.unwrap();
    let first = first.iter().find(|a| a.kind().as_str() == "refund").unwrap();
    // The same offer in a second staff member's conversation (a deposit's offer goes to all).
    let other = s.customer(db, "5511977776666").await;
    let second = ActionId::random();
    let offer = balcao::store::NewAction {
        id: second,
        tenant: s.tenant.id,
        conversation: other.conversation,
        payload: &first.payload,
        expires_at: first.expires_at,
        offer_text: &first.offer_text,
        proposed_by: None,
        offer: None,
        settle: None,
    };
    db.store.propose_action(&offer, Utc::now()).await.unwrap();
    confirm(db, &s, first.id, "wamid.two.1").await;
    confirm(db, &s, second, "wamid.two.2").await;
    let tool = ExecuteAction { store: db.store.clone(), replier, gateways: sandbox_gateways() };
    let executor = Executor::new(db.store.clone(), LEASE);
    let run = |action: ActionId, conversation: balcao::domain::ConversationId| {
        let (tool, executor, s) = (&tool, &executor, &s);
        async move {
            let contact = db.store.conversation_contact(s.tenant.id, conversation).await.unwrap().contact_id;
            let ctx = CallContext::outside_turn(&s.tenant, contact, conversation, Utc::now());
            executor.execute(tool, &ctx, &json!({ "action_id": action.to_string() })).await.unwrap()
        }
    };
    let (a, b) = tokio::join!(run(first.id, merchant), run(second, other.conversation));
    let executed = [&a, &b].iter().filter(|o| matches!(o, Outcome::Executed(_))).count();
    assert_eq!(executed, 1, "{a:?} / {b:?}");
    let told = |e: &str| e.contains("confirmada por outra pessoa da equipe");
    assert!([&a, &b].iter().any(|o| matches!(o, Outcome::Failed { error, .. } if told(error))), "{a:?} / {b:?}");
    let refunds = db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap();
    assert_eq!(refunds.iter().map(|r| r.amount_cents).collect::<Vec<_>>(), [2000]);
    let now = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    assert_eq!((now.refunded_cents, now.refund_reserved_cents), (2000, 2000));
});

contract!(a_payment_for_a_cancelled_charge_is_offered_back_once, |db| async move {
    let (s, app, charge) = charged(db, false).await;
    // "Cancelar cobrança" from the staff menu.
    post(&app, STAFF, pick(STAFF, "wamid.w.1", "m:withdraw")).await;
    app.drain_turns().await;
    assert!(last_rows(&inbox(db, s.tenant.id, STAFF).await).contains(&format!("m:withdraw:{}", charge.id)));
    post(&app, STAFF, pick(STAFF, "wamid.w.2", &format!("m:withdraw:{}", charge.id))).await;
    app.drain_turns().await;
    let answer = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(answer.body().contains(&format!("Cobrança nº {} cancelada", charge.id)), "{answer:?}");
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "cancelled");

    // The customer paid it anyway (a copy of the code kept in a banking app).
    let replier = local_replier(db);
    take_payment(&db.store, &replier, &s.tenant, charge.id, Some("E00000000202612041200abcdefghijk")).await.unwrap();
    let due = db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap();
    assert_eq!((due.status.as_str(), due.end_to_end_id.is_some()), ("refund_due", true));
    // Offered once, however many sweeps run.
    assert_eq!(offer_due_refunds(&db.store, &replier, Utc::now()).await.unwrap(), 1);
    assert_eq!(offer_due_refunds(&db.store, &replier, Utc::now()).await.unwrap(), 0);
    let offer = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(offer.body().contains("que já não valia mais"), "{offer:?}");
    post(&app, STAFF, button(STAFF, "wamid.w.click", &last_buttons(&[offer])[0])).await;
    app.drain_turns().await;
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "refunded");
});

contract!(the_console_offers_a_refund_the_staff_confirms, |db| async move {
    let (s, app, charge) = charged(db, true).await;
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let charges_page = format!("/admin/{}/charges", s.tenant.slug);
    let page = console.get(&charges_page).await;
    assert!(page.body.contains("value=\"50.00\"") && page.body.contains("Devolver"), "{}", page.body);
    let refund = format!("/admin/{}/charges/{}/refund", s.tenant.slug, charge.id);
    let at = |ok: &str| Some(format!("/admin/{}/charges?ok={ok}", s.tenant.slug));
    assert_eq!(console.post(&refund, &[("amount", "70,00")]).await.location, at("refund_amount"));
    assert_eq!(console.post(&refund, &[("amount", "15,00")]).await.location, at("refund_offered"));
    assert!(db.store.refunds_of_charge(s.tenant.id, charge.id).await.unwrap().is_empty(), "the console only offers");
    let offer = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(offer.body().contains("Devolver R$ 15,00"), "{offer:?}");
    post(&app, STAFF, button(STAFF, "wamid.k.click", &last_buttons(&[offer])[0])).await;
    app.drain_turns().await;
    let page = console.get(&charges_page).await;
    assert!(page.body.contains("devolvida em parte") && page.body.contains("devolvido R$ 15,00"), "{}", page.body);
    assert!(page.body.contains("value=\"35.00\""), "the form offers what is left: {}", page.body);
});
