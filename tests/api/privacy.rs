//! LGPD on both databases: "sair"/"parar" opts a customer out of reminders and proactive
//! notices (answered once, even when the turn runs again), "voltar" brings them back, staff are
//! never opted out; the console's contact page exports a customer's data and erases it
//! (checked table by table), idempotently, behind the session, the tenant and the CSRF token.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use balcao::domain::{ContactId, TenantId};
use balcao::jobs::{Replier, RunOutcome, Turn, TurnHandler};
use balcao::money::deposits::DepositRequests;
use balcao::store::{BookingStore, ChargeStore, OutboxStore, PrivacyStore};
use balcao::whatsapp::OutboundMessage;
use chrono::{Datelike, TimeDelta, Utc, Weekday};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{button, inbox, post, propose_charge};
use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb, local_test_config, sandbox_gateways};
use crate::support::console::Console;
use crate::support::payloads::{bytes, envelope, text};
use crate::support::scenario::{Customer, LEASE, STAFF, Scenario, catalog_file, local_replier, merchant_file};

const CUSTOMER: &str = "5511999990001";
const OTHER: &str = "5511999990002";

/// One column of a query with one bigint parameter, as text, straight from the database.
async fn column(db: &TestDb, sql: &'static str, id: i64) -> Vec<Option<String>> {
    crate::raw_pool!(db, pool => sqlx::query_scalar(sql).bind(id).fetch_all(&pool).await.unwrap())
}

async fn opted_out(db: &TestDb, tenant: TenantId, contact: ContactId) -> Option<chrono::DateTime<Utc>> {
    db.store.contact_record(tenant, contact).await.unwrap().unwrap().opted_out_at
}

/// Writes `body` as `from` through the signed webhook and runs the turn.
async fn say(app: &TestApp, from: &str, wamid: &str, body: &str) {
    post(app, from, text(wamid, from, body)).await;
    app.drain_turns().await;
}

/// Runs the wrapped handler twice per attempt and fails the first attempt after its work, so
/// the queue runs the turn again.
struct Twice {
    inner: Arc<dyn TurnHandler>,
    attempts: AtomicUsize,
}

#[async_trait]
impl TurnHandler for Twice {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        self.inner.handle(turn).await?;
        self.inner.handle(turn).await?;
        if self.attempts.fetch_add(1, Ordering::SeqCst) == 0 {
            anyhow::bail!("crashed after the work");
        }
        Ok(())
    }
}

/// Answers nothing: what the customer's agent would do is not under test here.
struct Silent;

#[async_trait]
impl TurnHandler for Silent {
    async fn handle(&self, _turn: &Turn) -> anyhow::Result<()> {
        Ok(())
    }
}

contract!(sair_opts_out_once_even_when_the_turn_runs_again_and_voltar_brings_back, |db| async move {
    let tenant = db.tenant().await;
    let app = TestApp::spawn_with(db, local_test_config("http://127.0.0.1:9", &[]), |ctx| {
        let opt_out = balcao::turns::OptOut::wrap(ctx.store, ctx.replier, Arc::new(Silent));
        Arc::new(Twice { inner: opt_out, attempts: AtomicUsize::new(0) })
    })
    .await;
    post(&app, CUSTOMER, text("wamid.p.1", CUSTOMER, "  Sáir! ")).await;
    let later = Utc::now() + TimeDelta::hours(2);
    let first = app.worker.run_next_at(later).await.unwrap();
    assert!(matches!(first, RunOutcome::WillRetry(_)), "{first:?}");
    let contact = ContactId(
        column(db, "SELECT CAST(id AS TEXT) FROM contacts WHERE tenant_id = $1", tenant.id.0).await[0]
            .as_deref()
            .unwrap()
            .parse()
            .unwrap(),
    );
    let since = opted_out(db, tenant.id, contact).await.expect("opted out");
    // The retry does it all again: nothing changes, nothing more is said.
    let second = app.worker.run_next_at(later + TimeDelta::hours(1)).await.unwrap();
    assert!(matches!(second, RunOutcome::Completed(_)), "{second:?}");
    assert_eq!(opted_out(db, tenant.id, contact).await, Some(since));
    let said = inbox(db, tenant.id, CUSTOMER).await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].body().contains("voltar") && said[0].body().contains("lembretes"), "{said:?}");

    // "voltar" opts back in, answered once as well.
    post(&app, CUSTOMER, text("wamid.p.2", CUSTOMER, "VOLTAR")).await;
    app.worker.run_next_at(later + TimeDelta::hours(3)).await.unwrap();
    app.worker.run_next_at(later + TimeDelta::hours(4)).await.unwrap();
    assert_eq!(opted_out(db, tenant.id, contact).await, None);
    let said = inbox(db, tenant.id, CUSTOMER).await;
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[1].body().contains("voltou a receber"), "{said:?}");

    // "voltar" from someone not opted out is not ours (it means "back" in the menu); neither is
    // a sentence that merely contains "sair".
    post(&app, CUSTOMER, text("wamid.p.3", CUSTOMER, "voltar")).await;
    post(&app, CUSTOMER, text("wamid.p.4", CUSTOMER, "quero sair mais cedo")).await;
    app.worker.run_next_at(later + TimeDelta::hours(5)).await.unwrap();
    app.worker.run_next_at(later + TimeDelta::hours(6)).await.unwrap();
    assert_eq!(opted_out(db, tenant.id, contact).await, None);
    assert_eq!(inbox(db, tenant.id, CUSTOMER).await.len(), 2);
});

contract!(the_app_opts_customers_out_but_never_staff, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    say(&app, STAFF, "wamid.s.1", "sair").await;
    say(&app, CUSTOMER, "wamid.s.2", "parar").await;
    let staff = s.customer(db, STAFF).await;
    let customer = s.customer(db, CUSTOMER).await;
    assert_eq!(opted_out(db, s.tenant.id, staff.contact).await, None, "staff are never opted out");
    assert!(opted_out(db, s.tenant.id, customer.contact).await.is_some());
    assert!(inbox(db, s.tenant.id, CUSTOMER).await.iter().any(|m| m.body().contains("voltar")));
    assert!(!inbox(db, s.tenant.id, STAFF).await.iter().any(|m| m.body().contains("voltar")));
});

/// 14:00 (and 15:00) in São Paulo on a weekday at least three days ahead.
fn slot(hour: u32) -> String {
    let mut day = (Utc::now() + TimeDelta::days(3)).date_naive();
    while matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
        day = day.succ_opt().unwrap();
    }
    format!("{day}T{hour}:00:00-03:00")
}

async fn book(s: &Scenario, c: &Customer, start: &str) -> i64 {
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": start });
    match s.call_at(c, "create_booking", input, Utc::now()).await {
        balcao::ledger::Outcome::Executed(v) => v["booking_id"].as_i64().unwrap(),
        other => panic!("{other:?}"),
    }
}

contract!(reminders_skip_an_opted_out_customer_until_they_come_back, |db| async move {
    let file = catalog_file("barbearia", PHONE_NUMBER_ID, "America/Sao_Paulo").replacen(
        "[booking]",
        "[reminders]\nhours_before = 24\ntemplate = { name = \"lembrete\", language = \"pt_BR\" }\n[booking]",
        1,
    );
    let s = Scenario::from_file(db, &file).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    let c = s.customer(db, CUSTOMER).await;
    let start = slot(14);
    book(&s, &c, &start).await;
    say(&app, CUSTOMER, "wamid.r.1", "sair").await;
    let due = chrono::DateTime::parse_from_rfc3339(&start).unwrap().with_timezone(&Utc) - TimeDelta::hours(23);
    assert_eq!(balcao::reminders::send_due(&db.store, &local_replier(db), due).await.unwrap(), 0);
    assert_eq!(reminders(db, s.tenant.id).await, 0, "an opted-out customer gets no reminder");
    // Back before it is due: the reminder comes after all.
    say(&app, CUSTOMER, "wamid.r.2", "voltar").await;
    assert_eq!(opted_out(db, s.tenant.id, c.contact).await, None, "{:?}", inbox(db, s.tenant.id, CUSTOMER).await);
    assert_eq!(balcao::reminders::send_due(&db.store, &local_replier(db), due).await.unwrap(), 1);
    assert_eq!(reminders(db, s.tenant.id).await, 1);
});

/// Reminders queued for the customer.
async fn reminders(db: &TestDb, tenant: TenantId) -> usize {
    let queued = db.store.outbound_for_wa_id(tenant, CUSTOMER, 0).await.unwrap();
    queued.iter().filter(|r| r.idempotency_key.starts_with("reminder:")).count()
}

contract!(expiry_notices_skip_an_opted_out_customer, |db| async move {
    let file = merchant_file().replacen("buffer_minutes = 10\n", "buffer_minutes = 10\ndeposit = \"40%\"\n", 1);
    let s = Scenario::from_file(db, &file).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    let ana = s.customer(db, CUSTOMER).await;
    let beto = s.customer(db, OTHER).await;
    say(&app, CUSTOMER, "wamid.e.1", "oi").await;
    say(&app, OTHER, "wamid.e.2", "oi").await;
    book(&s, &ana, &slot(14)).await;
    book(&s, &beto, &slot(15)).await;
    let requests = DepositRequests::new(db.store.clone(), local_replier(db), sandbox_gateways(), LEASE);
    assert_eq!(requests.request_due(Utc::now()).await.unwrap(), 2);
    say(&app, CUSTOMER, "wamid.e.3", "sair").await;

    // Both holds run out; only the customer who did not opt out is told.
    let after = Utc::now() + TimeDelta::minutes(31);
    assert_eq!(balcao::money::deposits::expire_due(&db.store, &local_replier(db), after).await.unwrap(), 2);
    let told = |messages: Vec<OutboundMessage>| messages.iter().filter(|m| m.body().contains("foi liberado")).count();
    assert_eq!(told(inbox(db, s.tenant.id, CUSTOMER).await), 0);
    assert_eq!(told(inbox(db, s.tenant.id, OTHER).await), 1);

    // A proposal that expires is not announced to them either (the scenario's clock is past).
    let id = book(&s, &ana, &slot(16)).await;
    let proposal = s.call(&ana, "cancel_booking", json!({ "booking_id": id })).await;
    assert!(matches!(proposal, balcao::ledger::Outcome::Executed(_)), "{proposal:?}");
    assert_eq!(balcao::actions::expire_due(&db.store, &local_replier(db)).await.unwrap(), 1);
    let expired = inbox(db, s.tenant.id, CUSTOMER).await.iter().filter(|m| m.body().contains("expirou")).count();
    assert_eq!(expired, 0);
});

/// The merchant's tenant with a customer who booked, was charged and talked; and an admin.
struct Erasable {
    s: Scenario,
    app: TestApp,
    customer: Customer,
    console: Console,
}

async fn erasable(db: &TestDb) -> Erasable {
    let file = merchant_file().replacen(
        "[booking]",
        "[reminders]\nhours_before = 24\ntemplate = { name = \"lembrete\", language = \"pt_BR\" }\n[booking]",
        1,
    );
    let s = Scenario::from_file(db, &file).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    say(&app, CUSTOMER, "wamid.x.1", "Meu nome é Sheena, quero cortar o cabelo").await;
    let customer = s.customer(db, CUSTOMER).await;
    let start = slot(14);
    book(&s, &customer, &start).await;
    // A reminder queued to be sent (not local), still unsent.
    let due = chrono::DateTime::parse_from_rfc3339(&start).unwrap().with_timezone(&Utc) - TimeDelta::hours(23);
    let sending = Replier::new(db.store.clone(), Some(balcao::domain::Secret::new("t")), false, Default::default());
    assert_eq!(balcao::reminders::send_due(&db.store, &sending, due).await.unwrap(), 1);
    let confirm = propose_charge(db, &app, &s, "charge").await;
    post(&app, STAFF, button(STAFF, "wamid.x.click", &confirm)).await;
    app.drain_turns().await;
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    Erasable { s, app, customer, console }
}

contract!(export_holds_the_customers_data_and_only_this_tenants, |db| async move {
    let e = erasable(db).await;
    // The same number writes to another tenant.
    let other = db.tenant_with("999000111", "outra-loja", None).await;
    let foreign = envelope("999000111", CUSTOMER, vec![text("wamid.o.1", CUSTOMER, "mensagem para a outra loja")]);
    assert_eq!(e.app.post_webhook(&bytes(&foreign)).await.status(), 200);
    e.app.drain_turns().await;

    let id = e.customer.contact.0;
    let page = e.console.get(&format!("/admin/{}/contacts/{id}", e.s.tenant.slug)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<td>Ana</td>") && page.body.contains("+5511999990001"), "{}", page.body);
    assert!(page.body.contains("Exportar dados (JSON)") && page.body.contains("Apagar dados pessoais"));

    let response = reqwest::Client::new()
        .get(format!("{}/admin/{}/contacts/{id}/export", e.app.url, e.s.tenant.slug))
        .header("cookie", e.console.cookie_header())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let disposition = response.headers()["content-disposition"].to_str().unwrap().to_owned();
    assert!(disposition.starts_with("attachment"), "{disposition}");
    let export: Value = response.json().await.unwrap();
    assert_eq!(export["contact"]["profile_name"], "Ana");
    let bodies: Vec<&str> =
        export["messages_in"].as_array().unwrap().iter().filter_map(|m| m["body"].as_str()).collect();
    assert!(bodies.contains(&"Meu nome é Sheena, quero cortar o cabelo"), "{bodies:?}");
    assert!(!bodies.contains(&"mensagem para a outra loja"), "another tenant's message leaked: {bodies:?}");
    assert!(!export["messages_out"].as_array().unwrap().is_empty());
    assert_eq!(export["appointments"].as_array().unwrap().len(), 1, "{export}");
    assert_eq!(export["appointments"][0]["service"], "Corte masculino");
    assert_eq!(export["charges"].as_array().unwrap().len(), 1, "{export}");
    assert_eq!(export["charges"][0]["description"], "Corte e barba");
    let _ = other;
});

contract!(erasure_anonymizes_everywhere_keeps_the_books_and_is_idempotent, |db| async move {
    let e = erasable(db).await;
    let (tenant, id) = (e.s.tenant.id, e.customer.contact.0);
    let conversation = e.customer.conversation.0;
    let appointments = db.store.count_active_appointments(tenant).await.unwrap();
    let charge = db.store.charges(tenant, None, Utc::now() - TimeDelta::days(1), 10).await.unwrap().remove(0);
    let pending = column(
        db,
        "SELECT status FROM outbound_messages WHERE conversation_id = $1 AND status = 'pending'",
        conversation,
    )
    .await;
    assert!(!pending.is_empty(), "the scenario leaves unsent messages");

    let path = format!("/admin/{}/contacts/{id}", e.s.tenant.slug);
    e.console.get(&path).await;
    // Without the confirmation box, nothing happens.
    let refused = e.console.post(&format!("{path}/erase"), &[]).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(db.store.contact_record(tenant, e.customer.contact).await.unwrap().unwrap().erased_at.is_none());
    let done = e.console.post(&format!("{path}/erase"), &[("confirm", "sim")]).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.location.as_deref(), Some(path.as_str()));

    // The contact: no name, no number, a unique placeholder key.
    let record = db.store.contact_record(tenant, e.customer.contact).await.unwrap().unwrap();
    assert_eq!((record.profile_name, record.wa_id, record.user_id, record.username), (None, None, None, None));
    let erased_at = record.erased_at.expect("erased");
    assert_eq!(column(db, "SELECT external_key FROM contacts WHERE id = $1", id).await, [Some(format!("erased:{id}"))]);

    // Messages in: no text, no raw payload with the name or number.
    let bodies = column(db, "SELECT body FROM inbound_messages WHERE conversation_id = $1", conversation).await;
    assert!(!bodies.is_empty() && bodies.iter().all(Option::is_none), "{bodies:?}");
    for raw in
        column(db, "SELECT CAST(raw AS TEXT) FROM inbound_messages WHERE conversation_id = $1", conversation).await
    {
        let raw = raw.unwrap();
        assert!(!raw.contains("Sheena") && !raw.contains("Ana") && !raw.contains(CUSTOMER), "{raw}");
    }
    // Messages out: contents and recipients replaced; unsent ones cancelled, never sent.
    for message in
        column(db, "SELECT CAST(message AS TEXT) FROM outbound_messages WHERE conversation_id = $1", conversation).await
    {
        let message = message.unwrap();
        assert!(message.contains("apagados") && !message.contains("Corte") && !message.contains("R$"), "{message}");
    }
    assert!(
        column(db, "SELECT to_wa_id FROM outbound_messages WHERE conversation_id = $1", conversation)
            .await
            .iter()
            .all(Option::is_none)
    );
    let statuses = column(db, "SELECT status FROM outbound_messages WHERE conversation_id = $1", conversation).await;
    assert!(statuses.iter().all(|s| matches!(s.as_deref(), Some("cancelled" | "local"))), "{statuses:?}");
    assert!(statuses.iter().any(|s| s.as_deref() == Some("cancelled")), "{statuses:?}");
    assert!(e.app.drain_outbox().await.iter().all(|o| !format!("{o:?}").contains(CUSTOMER)));
    // The model's history is gone; the customer's ledger rows are redacted.
    assert!(
        column(db, "SELECT CAST(id AS TEXT) FROM conversation_messages WHERE conversation_id = $1", conversation)
            .await
            .is_empty()
    );
    for args in column(db, "SELECT CAST(arguments AS TEXT) FROM agent_tool_executions WHERE contact_id = $1", id).await
    {
        assert!(args.unwrap().contains("erased"));
    }
    // The merchant's charge proposal no longer names the customer; the charge keeps its amount.
    let tenant_id = tenant.0;
    for payload in column(
        db,
        "SELECT CAST(payload AS TEXT) FROM pending_actions WHERE tenant_id = $1 AND kind = 'charge'",
        tenant_id,
    )
    .await
    {
        let payload = payload.unwrap();
        assert!(!payload.contains("99999") && !payload.contains("Corte e barba"), "{payload}");
    }
    for offer in column(db, "SELECT offer_text FROM pending_actions WHERE tenant_id = $1", tenant_id).await {
        let offer = offer.unwrap();
        assert!(!offer.contains("Corte e barba") && !offer.contains("99999"), "{offer}");
    }
    let kept = db.store.charge(tenant, charge.id).await.unwrap().unwrap();
    assert_eq!(
        (kept.amount_cents, kept.status.as_str(), kept.txid.as_str()),
        (charge.amount_cents, charge.status.as_str(), charge.txid.as_str())
    );
    assert!(kept.description != "Corte e barba" && !kept.customer_phone.contains("99999"), "{kept:?}");
    assert_eq!(db.store.count_active_appointments(tenant).await.unwrap(), appointments);
    assert_eq!(
        column(db, "SELECT CAST(contact_id AS TEXT) FROM appointments WHERE contact_id = $1", id).await.len(),
        1
    );

    // The page says so; a second erasure changes nothing.
    let page = e.console.get(&path).await;
    assert!(page.body.contains("foram apagados") && !page.body.contains("<td>Ana</td>"), "{}", page.body);
    let again = e.console.post(&format!("{path}/erase"), &[("confirm", "sim")]).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    assert_eq!(db.store.contact_record(tenant, e.customer.contact).await.unwrap().unwrap().erased_at, Some(erased_at));

    // Writing again makes a new contact: the erased one stays erased.
    say(&e.app, CUSTOMER, "wamid.x.after", "oi de novo").await;
    let fresh = e.s.customer(db, CUSTOMER).await;
    assert_ne!(fresh.contact, e.customer.contact);
});

contract!(the_contact_pages_are_guarded, |db| async move {
    let e = erasable(db).await;
    let other = db.tenant_with("999000111", "outra-loja", None).await;
    let foreign = envelope("999000111", OTHER, vec![text("wamid.g.1", OTHER, "oi")]);
    assert_eq!(e.app.post_webhook(&bytes(&foreign)).await.status(), 200);
    e.app.drain_turns().await;
    let foreign_id: i64 = column(db, "SELECT CAST(id AS TEXT) FROM contacts WHERE tenant_id = $1", other.id.0).await[0]
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let slug = &e.s.tenant.slug;
    let mine = e.customer.contact.0;

    // Without a session: to the login page, for every route.
    let anonymous = Console::new(&e.app.url);
    for path in [format!("/admin/{slug}/contacts/{mine}"), format!("/admin/{slug}/contacts/{mine}/export")] {
        assert_eq!(anonymous.get(&path).await.location.as_deref(), Some("/admin/login"), "{path}");
    }
    anonymous.get("/admin/login").await;
    let erase = anonymous.post(&format!("/admin/{slug}/contacts/{mine}/erase"), &[("confirm", "sim")]).await;
    assert_eq!(erase.location.as_deref(), Some("/admin/login"));

    // Another tenant's contact, through this tenant or through that tenant: not found.
    for path in [
        format!("/admin/{slug}/contacts/{foreign_id}"),
        format!("/admin/{slug}/contacts/{foreign_id}/export"),
        format!("/admin/{}/contacts/{foreign_id}", other.slug),
        format!("/admin/{slug}/contacts/999999"),
    ] {
        assert_eq!(e.console.get(&path).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    e.console.get(&format!("/admin/{slug}/contacts/{mine}")).await;
    let page = e.console.post(&format!("/admin/{slug}/contacts/{foreign_id}/erase"), &[("confirm", "sim")]).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(db.store.contact_record(other.id, ContactId(foreign_id)).await.unwrap().unwrap().erased_at.is_none());

    // Without the CSRF token: refused, nothing erased.
    let page = e.console.post_raw(&format!("/admin/{slug}/contacts/{mine}/erase"), &[("confirm", "sim")]).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(db.store.contact_record(e.s.tenant.id, e.customer.contact).await.unwrap().unwrap().erased_at.is_none());
});
