//! Pending actions end to end through signed webhooks, on both databases: a merchant's Pix
//! charge confirmed by a button (the click path, never the model), duplicate, late, forged and
//! foreign clicks, a crash between the confirm and the execution, the paid path, and a
//! customer's cancellation confirmed by a button.

use balcao::domain::{ActionId, ClickId, Decision, TenantId};
use balcao::store::{ActionStore, BookingStore, ChargeStore, InboundStore, OutboxStore};
use balcao::whatsapp::OutboundMessage;
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{CUSTOMER, button, inbox, last_buttons, post, propose_charge};
use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb, local_test_config};
use crate::support::payloads::{bytes, envelope, text};
use crate::support::scenario::{STAFF, Scenario, merchant_file, next_weekday_at_14h};

fn quick_reply(from: &str, wamid: &str, payload: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": "1", "type": "button",
            "context": { "from": "15550783881", "id": "wamid.template" },
            "button": { "payload": payload, "text": "Confirmo" } })
}

async fn app_with_customer(db: &TestDb, s: &Scenario) -> TestApp {
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    // The customer wrote today: the charge may go as free-form text.
    post(&app, CUSTOMER, text("wamid.c.1", CUSTOMER, "oi")).await;
    app.drain_turns().await;
    let _ = s;
    app
}

async fn charge_count(db: &TestDb, tenant: TenantId) -> usize {
    db.store.charges(tenant, None, chrono::Utc::now() - chrono::TimeDelta::days(1), 100).await.unwrap().len()
}

contract!(a_charge_is_sent_by_the_merchants_button_and_paid_once, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = app_with_customer(db, &s).await;
    let confirm = propose_charge(db, &app, &s, "m").await;
    assert_eq!(charge_count(db, s.tenant.id).await, 0, "nothing happens before the click");

    post(&app, STAFF, button(STAFF, "wamid.m.click", &confirm)).await;
    app.drain_turns().await;
    let merchant = inbox(db, s.tenant.id, STAFF).await;
    assert!(merchant.last().unwrap().body().contains("de R$ 50,00 enviada"), "{:?}", merchant.last());

    let charges =
        db.store.charges(s.tenant.id, None, chrono::Utc::now() - chrono::TimeDelta::days(1), 10).await.unwrap();
    assert_eq!(charges.len(), 1);
    let charge = &charges[0];
    assert_eq!(
        (charge.amount_cents, charge.description.as_str(), charge.status.as_str()),
        (5000, "Corte e barba", "pending")
    );
    // The code is a valid static BR Code for this amount and txid.
    let code = balcao::pix::decode(&charge.copia_e_cola).expect("a valid BR Code");
    assert_eq!(code.amount(), Some(balcao::domain::Cents(5000)));
    assert_eq!(code.txid(), Some(charge.txid.as_str()));

    let customer = inbox(db, s.tenant.id, CUSTOMER).await;
    let tail: Vec<&OutboundMessage> = customer.iter().rev().take(3).rev().collect();
    assert!(tail[0].body().contains("R$ 50,00") && tail[0].body().contains("Corte e barba"), "{:?}", tail[0]);
    assert_eq!(tail[1].body(), charge.copia_e_cola);
    assert!(matches!(tail[2], OutboundMessage::QrImage { payload, .. } if *payload == charge.copia_e_cola));

    // "Marcar como pago", twice (a double click): paid once, each party told once.
    let paid_path = format!("{}/simulator/api/tenants/barbearia/charges/{}/paid", app.url, charge.id);
    // A plain POST (what another web site could make a browser send) pays nothing.
    let plain = app.http.post(&paid_path).send().await.unwrap();
    assert_eq!(plain.status(), reqwest::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let first: Value = app.http.post(&paid_path).json(&json!({})).send().await.unwrap().json().await.unwrap();
    let second: Value = app.http.post(&paid_path).json(&json!({})).send().await.unwrap().json().await.unwrap();
    assert_eq!((first["paid"].clone(), second["paid"].clone()), (json!(true), json!(false)));
    let told =
        |messages: Vec<OutboundMessage>, needle: &str| messages.iter().filter(|m| m.body().contains(needle)).count();
    assert_eq!(told(inbox(db, s.tenant.id, CUSTOMER).await, "Recebemos seu pagamento"), 1);
    assert_eq!(told(inbox(db, s.tenant.id, STAFF).await, "Cobrança paga"), 1);
    assert_eq!(db.store.charge(s.tenant.id, charge.id).await.unwrap().unwrap().status, "paid");

    // "Cobranças de hoje" lists it with the day's total.
    post(&app, STAFF, button(STAFF, "wamid.m.today", "m:today")).await;
    app.drain_turns().await;
    let today = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(
        today.body().contains("Corte e barba (paga)") && today.body().contains("Total pago hoje: R$ 50,00"),
        "{today:?}"
    );
});

contract!(repeated_and_racing_clicks_charge_once, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = app_with_customer(db, &s).await;
    let confirm = propose_charge(db, &app, &s, "r").await;

    // The same click delivered five times at once: stored once, answered once.
    let deliveries = (0..5).map(|_| post(&app, STAFF, button(STAFF, "wamid.r.click", &confirm)));
    futures::future::join_all(deliveries).await;
    app.drain_turns().await;
    // A second device taps the same button: a new message, no second effect.
    post(&app, STAFF, button(STAFF, "wamid.r.click2", &confirm)).await;
    app.drain_turns().await;

    assert_eq!(charge_count(db, s.tenant.id).await, 1);
    let merchant = inbox(db, s.tenant.id, STAFF).await;
    let sent = merchant.iter().filter(|m| m.body().contains("de R$ 50,00 enviada")).count();
    let already = merchant.iter().filter(|m| m.body().contains("já foi confirmado")).count();
    assert_eq!((sent, already), (1, 1), "{merchant:?}");
    let customer = inbox(db, s.tenant.id, CUSTOMER).await;
    assert_eq!(customer.iter().filter(|m| matches!(m, OutboundMessage::QrImage { .. })).count(), 1);
});

contract!(foreign_forged_and_late_clicks_do_nothing, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = app_with_customer(db, &s).await;
    let confirm = propose_charge(db, &app, &s, "f").await;

    // The customer (another conversation, not staff) taps the merchant's button id.
    post(&app, CUSTOMER, button(CUSTOMER, "wamid.f.foreign", &confirm)).await;
    // A forged id: well-formed, naming no action.
    let forged = ClickId::new(ActionId::random(), Decision::Confirm).id();
    post(&app, STAFF, button(STAFF, "wamid.f.forged", &forged)).await;
    app.drain_turns().await;
    assert!(inbox(db, s.tenant.id, CUSTOMER).await.last().unwrap().body().contains("não vale para esta conversa"));
    assert!(inbox(db, s.tenant.id, STAFF).await.last().unwrap().body().contains("Não encontrei essa proposta"));
    // The same id clicked through another tenant's number: that tenant has no such action.
    let other = db.tenant_with("999000111", "outra", None).await;
    let envelope_other = envelope("999000111", STAFF, vec![button(STAFF, "wamid.f.other", &confirm)]);
    assert_eq!(app.post_webhook(&bytes(&envelope_other)).await.status(), 200);
    app.drain_turns().await;
    assert!(inbox(db, other.id, STAFF).await.last().unwrap().body().contains("Não encontrei essa proposta"));

    // Typing "sim" does not confirm money: the staff menu comes back, no charge.
    post(&app, STAFF, text("wamid.f.sim", STAFF, "sim")).await;
    app.drain_turns().await;
    assert_eq!(charge_count(db, s.tenant.id).await, 0);

    // Once expired, the button does nothing.
    let later = chrono::Utc::now() + chrono::TimeDelta::hours(2);
    let expired = db.store.expire_actions(later, 100, &|_, _| None).await.unwrap();
    assert_eq!(expired.len(), 1);
    post(&app, STAFF, button(STAFF, "wamid.f.late", &confirm)).await;
    app.drain_turns().await;
    assert!(inbox(db, s.tenant.id, STAFF).await.last().unwrap().body().contains("expirou"));
    assert_eq!(charge_count(db, s.tenant.id).await, 0);
});

contract!(a_crash_between_confirm_and_execution_is_finished_once, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = app_with_customer(db, &s).await;
    let confirm = propose_charge(db, &app, &s, "x").await;
    let click = ClickId::parse(&confirm).unwrap();

    // A worker confirmed with this click and died before executing: the action is confirmed,
    // nothing exists at the gateway or in `charges`.
    let staff =
        db.store.conversation_of_contact(s.tenant.id, staff_or_customer(db, &s, STAFF).await).await.unwrap().unwrap();
    let by = balcao::store::Decider {
        tenant: s.tenant.id,
        conversation: staff,
        contact: staff_or_customer(db, &s, STAFF).await,
        staff: true,
        via: balcao::actions::ConfirmedVia::Button,
        message: "wamid.x.click",
        simulator: None,
    };
    assert!(db.store.decide_action(click.action, Decision::Confirm, &by, chrono::Utc::now()).await.unwrap());
    assert_eq!(charge_count(db, s.tenant.id).await, 0);

    // The click's job runs (its retry): it finds the action confirmed by itself and executes.
    post(&app, STAFF, button(STAFF, "wamid.x.click", &confirm)).await;
    app.drain_turns().await;
    assert_eq!(charge_count(db, s.tenant.id).await, 1);
    let action = db.store.action(s.tenant.id, click.action).await.unwrap().unwrap();
    assert_eq!(action.status, balcao::actions::ActionStatus::Executed);
    // Another device's click after that: already confirmed.
    post(&app, STAFF, button(STAFF, "wamid.x.again", &confirm)).await;
    app.drain_turns().await;
    assert_eq!(charge_count(db, s.tenant.id).await, 1);
});

contract!(a_customer_cancels_with_a_button_and_an_old_button_books_nothing, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = app_with_customer(db, &s).await;
    let c = crate::support::scenario::Customer {
        contact: staff_or_customer(db, &s, CUSTOMER).await,
        conversation: db
            .store
            .conversation_of_contact(s.tenant.id, staff_or_customer(db, &s, CUSTOMER).await)
            .await
            .unwrap()
            .unwrap(),
    };
    let start = next_weekday_at_14h();
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": start });
    let booked = match s.call_at(&c, "create_booking", input, chrono::Utc::now()).await {
        balcao::ledger::Outcome::Executed(v) => v,
        other => panic!("{other:?}"),
    };
    // "Meus horários" → the booking → its cancellation's buttons.
    post(&app, CUSTOMER, text("wamid.k.1", CUSTOMER, "meus horários")).await;
    app.drain_turns().await;
    let cancel_row = format!("g:cancel:{}", booked["booking_id"]);
    post(
        &app,
        CUSTOMER,
        json!({ "from": CUSTOMER, "id": "wamid.k.2", "timestamp": "1", "type": "interactive",
        "interactive": { "type": "list_reply", "list_reply": { "id": cancel_row, "title": "x" } } }),
    )
    .await;
    app.drain_turns().await;
    let offer = inbox(db, s.tenant.id, CUSTOMER).await;
    let yes = last_buttons(&offer)[0].clone();
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1, "proposed, not cancelled");

    post(&app, CUSTOMER, button(CUSTOMER, "wamid.k.3", &yes)).await;
    app.drain_turns().await;
    assert!(inbox(db, s.tenant.id, CUSTOMER).await.last().unwrap().body().starts_with("Pronto, o horário"));
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);

    // The same button tapped again later: already confirmed, nothing cancelled or booked.
    post(&app, CUSTOMER, button(CUSTOMER, "wamid.k.4", &yes)).await;
    app.drain_turns().await;
    assert!(inbox(db, s.tenant.id, CUSTOMER).await.last().unwrap().body().contains("já foi confirmado"));
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);

    // A reminder's template quick reply (`button.payload`) is a click like any other.
    let attendance = ClickId::new(ActionId::random(), Decision::Confirm).id();
    post(&app, CUSTOMER, quick_reply(CUSTOMER, "wamid.k.5", &attendance)).await;
    app.drain_turns().await;
    assert!(inbox(db, s.tenant.id, CUSTOMER).await.last().unwrap().body().contains("Não encontrei"));
});

async fn staff_or_customer(db: &TestDb, s: &Scenario, wa_id: &str) -> balcao::domain::ContactId {
    let rows = db.store.outbound_for_wa_id(s.tenant.id, wa_id, 0).await.unwrap();
    let conversation = balcao::domain::ConversationId(rows[0].conversation_id);
    db.store.conversation_contact(s.tenant.id, conversation).await.unwrap().contact_id
}

contract!(outside_the_window_a_charge_goes_as_the_template_or_not_at_all, |db| async move {
    // Without a charge template: the proposal is refused, saying why.
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    post(&app, STAFF, button(STAFF, "wamid.w.1", "m:charge")).await;
    app.drain_turns().await;
    for (n, answer) in ["50", "11 99999-0001", "Corte"].iter().enumerate() {
        post(&app, STAFF, text(&format!("wamid.w.{}", n + 2), STAFF, answer)).await;
        app.drain_turns().await;
    }
    let refused = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(refused.body().contains("mais de 24 horas"), "{refused:?}");

    // With one: the customer, who never wrote, receives the template; the merchant is told so.
    let file = merchant_file().replacen(
        &format!("phone_number_id = \"{PHONE_NUMBER_ID}\""),
        &format!("phone_number_id = \"{PHONE_NUMBER_ID}\"\ncharge_template = {{ name = \"cobranca_pix\" }}"),
        1,
    );
    let s = Scenario::from_file(db, &file).await;
    let confirm = propose_charge(db, &app, &s, "t").await;
    let offer = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(offer.body().contains("não escreve há mais de 24 horas"), "told before Confirmar: {}", offer.body());
    post(&app, STAFF, button(STAFF, "wamid.t.click", &confirm)).await;
    app.drain_turns().await;
    assert!(inbox(db, s.tenant.id, STAFF).await.pop().unwrap().body().contains("modelo de mensagem"));
    let charge = db.store.charges(s.tenant.id, None, chrono::Utc::now() - chrono::TimeDelta::days(1), 1).await.unwrap();
    match inbox(db, s.tenant.id, CUSTOMER).await.pop() {
        Some(OutboundMessage::Template { name, language, body_params, .. }) => {
            assert_eq!((name.as_str(), language.as_str()), ("cobranca_pix", "pt_BR"));
            assert_eq!(body_params, ["R$ 50,00", "Corte e barba", charge[0].copia_e_cola.as_str()]);
        }
        other => panic!("expected the template, got {other:?}"),
    }
});

// The first click confirmed the charge and its worker carried it out, then stopped before it
// marked the action executed (the action is still "confirmed"). A second click on the same
// button finds it unfinished and answers with the outcome the ledger replays; the first
// click, redelivered, answers with it too. The merchant reads "charge sent" once. (Each click
// answered under its own job's key before: the campaign saw a presence confirmed twice.)
contract!(an_action_carried_out_before_two_clicks_answer_is_told_once, |db| async move {
    use balcao::actions::{ConfirmedVia, ExecuteAction};
    use balcao::ledger::{CallContext, Executor, Outcome};
    use balcao::store::Decider;

    let s = Scenario::with_merchant(db).await;
    let app = app_with_customer(db, &s).await;
    let confirm = propose_charge(db, &app, &s, "o").await;
    let click = ClickId::parse(&confirm).expect("a click id");
    let tenant = s.tenant.id;
    let action = db.store.action(tenant, click.action).await.unwrap().expect("the proposal");
    let merchant = db.store.conversation_contact(tenant, action.conversation).await.unwrap().contact_id;
    let by = Decider {
        tenant,
        conversation: action.conversation,
        contact: merchant,
        staff: true,
        via: ConfirmedVia::Button,
        message: "wamid.o.click1",
        simulator: None,
    };
    assert!(db.store.decide_action(click.action, Decision::Confirm, &by, chrono::Utc::now()).await.unwrap());
    let replier = balcao::jobs::Replier::new(db.store.clone(), None, true, Default::default());
    let execute =
        ExecuteAction { store: db.store.clone(), replier, gateways: crate::support::common::sandbox_gateways() };
    let ctx = CallContext {
        trigger_message_id: Some("wamid.o.click1"),
        ..CallContext::outside_turn(&s.tenant, merchant, action.conversation, chrono::Utc::now())
    };
    let executor = Executor::new(db.store.clone(), crate::support::scenario::LEASE);
    let input = json!({ "action_id": click.action.to_string() });
    assert!(matches!(executor.execute(&execute, &ctx, &input).await.unwrap(), Outcome::Executed(_)));

    post(&app, STAFF, button(STAFF, "wamid.o.click2", &confirm)).await;
    app.drain_turns().await;
    post(&app, STAFF, button(STAFF, "wamid.o.click1", &confirm)).await;
    app.drain_turns().await;

    let sent = inbox(db, tenant, STAFF).await.iter().filter(|m| m.body().contains("de R$ 50,00 enviada")).count();
    assert_eq!(sent, 1, "the outcome told once");
    assert_eq!(charge_count(db, tenant).await, 1);
    let action = db.store.action(tenant, click.action).await.unwrap().expect("the action");
    assert_eq!(action.status, balcao::actions::ActionStatus::Executed);
});

contract!(amounts_are_typed_and_shown_as_brazilians_write_them, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = app_with_customer(db, &s).await;
    post(&app, STAFF, text("wamid.v.1", STAFF, "oi")).await;
    app.drain_turns().await;
    post(&app, STAFF, crate::support::clicks::pick(STAFF, "wamid.v.2", "m:charge")).await;
    app.drain_turns().await;
    for (n, (typed, answer)) in [
        ("0", "O valor precisa ser maior que zero."),
        ("R$ 99.999.999,00", "Esse valor passa do limite de R$ 10.000.000,00."),
        ("1,234.56", "Não entendi o valor: use só números"),
        ("1.234,56", "Para quem é a cobrança?"),
    ]
    .into_iter()
    .enumerate()
    {
        post(&app, STAFF, text(&format!("wamid.v.a{n}"), STAFF, typed)).await;
        app.drain_turns().await;
        let last = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
        assert!(last.body().starts_with(answer), "{typed}: {}", last.body());
    }
    // The customer who wrote today is offered, by name and number, in the tenant's zone.
    let ask = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    let OutboundMessage::List { sections, .. } = &ask else { panic!("{ask:?}") };
    let row = &sections[0].rows[0];
    assert_eq!(row.id, format!("m:to:{CUSTOMER}"));
    assert!(
        row.description.as_deref().is_some_and(|d| d.starts_with(&format!("+{CUSTOMER} · escreveu em "))),
        "{row:?}"
    );
    post(&app, STAFF, crate::support::clicks::pick(STAFF, "wamid.v.b0", &row.id)).await;
    app.drain_turns().await;
    post(&app, STAFF, text("wamid.v.b1", STAFF, "Corte e barba")).await;
    app.drain_turns().await;
    let offer = inbox(db, s.tenant.id, STAFF).await.pop().unwrap();
    assert!(offer.body().contains("R$ 1.234,56") && offer.body().contains(CUSTOMER), "{}", offer.body());
    assert!(!offer.body().contains("24 horas"), "the customer wrote today: no template");
});
