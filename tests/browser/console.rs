//! The console as a merchant uses it, in Chromium: log in, find the booking in the agenda grid,
//! open its conversation and see the trace with the ledger keys; see a charge paid; take a
//! conversation over, answer as a person and hand it back.

use balcao::domain::{ContactId, ConversationId, TenantId};
use balcao::store::{BookingStore, ConsoleAgendaStore, ConversationViewStore, TenantStore};
use serde_json::json;

use crate::contract;
use crate::harness::{Browser, Server, local_config};
use crate::simulator::{EXAMPLE, SLUG, book_by_buttons, charge_and_pay, connected, next_choices, say};
use crate::support::common::TestDb;

const EMAIL: &str = "ze@barbearia.example";
const PASSWORD: &str = "senha-forte-123";
const CUSTOMER: &str = "5511900000001";

async fn login(b: &Browser, server: &Server, db: &TestDb) {
    balcao::http::console::auth::add_admin(&db.store, EMAIL, PASSWORD, SLUG).await.expect("add admin");
    b.goto(&format!("{}/admin/login", server.url)).await;
    b.screenshot("login").await;
    b.fill("input[name=email]", EMAIL).await;
    b.fill("input[name=password]", PASSWORD).await;
    b.click("#login").await;
    b.wait_for("header.top form.logout").await;
}

async fn tenant(db: &TestDb) -> TenantId {
    db.store.tenant_by_slug(SLUG).await.unwrap().expect("the example tenant").id
}

/// The customer's conversation and contact.
async fn conversation(db: &TestDb, wa_id: &str) -> (ConversationId, ContactId) {
    let summary = db
        .store
        .conversations_page(tenant(db).await, 100, 0)
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.wa_id.as_deref() == Some(wa_id))
        .expect("the customer's conversation");
    (ConversationId(summary.id), ContactId(summary.contact_id))
}

/// The texts of the bot's messages on the simulator page, in order.
async fn bot_texts(b: &Browser) -> Vec<String> {
    let texts = b.eval("return [...document.querySelectorAll('.msg.in')].map(e => e.textContent)", vec![]).await;
    serde_json::from_value(texts).expect("texts")
}

contract!(the_merchant_finds_the_booking_and_its_trace, |db| async move {
    let Some(b) = Browser::start(&format!("console-booking-{}", db.store.backend())).await else { return };
    Server::apply_tenant(db, EXAMPLE).await;
    let server = Server::start(db, local_config()).await;
    book_by_buttons(&b, &server).await;

    let tenant_id = tenant(db).await;
    let tenant = db.store.tenant(tenant_id).await.unwrap().unwrap();
    let (conversation, contact) = conversation(db, CUSTOMER).await;
    let since = chrono::Utc::now() - chrono::TimeDelta::days(1);
    let booked = db.store.upcoming_appointments(tenant_id, contact, since).await.unwrap();
    let [appointment] = booked.as_slice() else { panic!("one appointment: {booked:?}") };
    let detail = db.store.appointment_detail(tenant_id, appointment.id).await.unwrap().expect("detail");
    let key = detail.idempotency_key.expect("the booking's ledger key");

    login(&b, &server, db).await;
    let day = appointment.starts_at.with_timezone(&tenant.timezone).format("%Y-%m-%d");
    b.goto(&format!("{}/admin/{SLUG}/agenda?date={day}", server.url)).await;
    let block = format!("[data-appointment=\"{}\"]", appointment.id);
    b.wait_for(&block).await;
    b.screenshot("agenda-day").await;
    b.goto(&format!("{}/admin/{SLUG}/agenda?date={day}&view=week", server.url)).await;
    b.wait_for(&block).await;
    b.screenshot("agenda-week").await;

    b.click(&block).await;
    b.wait_for_text("main", &key).await;
    b.screenshot("appointment").await;

    b.goto(&format!("{}/admin/{SLUG}/conversations/{}", server.url, conversation.0)).await;
    b.wait_for_text("main", "Pronto!").await;
    let calls = db.store.executions_from(tenant_id, conversation, 0).await.unwrap();
    assert!(!calls.is_empty(), "the booking went through the ledger");
    for call in &calls {
        b.wait_for_text("main", &call.idempotency_key).await;
    }
    b.screenshot("conversation-trace").await;

    b.close().await;
    server.stop().await;
});

contract!(the_console_shows_a_charge_paid_from_the_simulator, |db| async move {
    let Some(b) = Browser::start(&format!("console-charge-{}", db.store.backend())).await else { return };
    Server::apply_tenant(db, EXAMPLE).await;
    let server = Server::start(db, local_config()).await;
    charge_and_pay(&b, &server).await;

    login(&b, &server, db).await;
    b.goto(&format!("{}/admin/{SLUG}/charges", server.url)).await;
    b.wait_for_text("main", "R$ 50,00").await;
    let paid = b.eval("return document.querySelectorAll('main .badge.paid').length", vec![]).await;
    assert_eq!(paid, json!(1), "one paid charge");
    b.screenshot("charges").await;

    b.close().await;
    server.stop().await;
});

contract!(a_person_takes_a_conversation_over_and_hands_it_back, |db| async move {
    let Some(b) = Browser::start(&format!("console-handoff-{}", db.store.backend())).await else { return };
    Server::apply_tenant(db, EXAMPLE).await;
    let server = Server::start(db, local_config()).await;
    let simulator = format!("{}/simulator?tenant={SLUG}", server.url);
    b.goto(&simulator).await;
    connected(&b, CUSTOMER).await;
    say(&b, "oi").await;
    let first_menu = next_choices(&b, 0).await;
    let (conversation, _) = conversation(db, CUSTOMER).await;
    let page = format!("{}/admin/{SLUG}/conversations/{}", server.url, conversation.0);

    login(&b, &server, db).await;
    b.goto(&page).await;
    b.click("form[action$=\"/handoff\"] button").await;
    b.wait_for_text("main", "humano").await;
    b.screenshot("taken-over").await;

    // The bot stays silent; the person answers from the console.
    b.goto(&simulator).await;
    connected(&b, CUSTOMER).await;
    say(&b, "quero falar com alguém").await;
    b.goto(&page).await;
    b.wait_for_text("main", "quero falar com alguém").await;
    b.fill("form.reply textarea[name=text]", "Oi! Aqui é o Zé, já te atendo.").await;
    b.click("form.reply button").await;
    b.wait_for_text("main", "Aqui é o Zé").await;
    b.screenshot("human-reply").await;

    b.click("form[action$=\"/release\"] button").await;
    b.wait_until("the bot is back", "return !document.querySelector('main').textContent.includes('humano')", vec![])
        .await;
    b.goto(&simulator).await;
    connected(&b, CUSTOMER).await;
    b.wait_for_text(".msg.in", "Aqui é o Zé").await;
    say(&b, "oi").await;
    next_choices(&b, first_menu).await;
    b.screenshot("bot-back").await;

    // Conversation turns run in order: by the time the bot answered the last "oi", the turn of
    // the message sent during the takeover had run, and it said nothing.
    let texts = bot_texts(&b).await;
    assert_eq!(texts.len(), 3, "menu, the person's reply, menu: {texts:?}");
    assert!(texts[1].contains("Aqui é o Zé"), "{texts:?}");

    b.close().await;
    server.stop().await;
});

/// The README demo's last step: the admin logs in, opens **Conversas** and the customer's
/// conversation, and finds the "remarcar" turn folded right under the message it answered,
/// before the bot's answer; one click unfolds it.
pub async fn readme_console_step(b: &Browser, server: &Server, db: &TestDb, customer: &str) {
    login(b, server, db).await;
    b.goto(&format!("{}/admin", server.url)).await;
    b.click("nav a[href$=\"/conversations\"]").await;
    let (conversation, _) = conversation(db, customer).await;
    b.click(&format!("main a[href$=\"/conversations/{}\"]", conversation.0)).await;
    b.wait_for_text(".timeline .bubble.in .text", "remarcar").await;
    let script = "const all = [...document.querySelectorAll('.timeline > *')]; \
                  const asked = all.findIndex(e => e.matches('.bubble.in') && \
                    e.querySelector('.text').textContent.trim() === 'remarcar'); \
                  if (asked < 0) return 'no remarcar bubble'; \
                  const trace = all[asked + 1]; \
                  if (!trace || !trace.matches('details.trace')) return 'no trace right after it'; \
                  const answer = all.slice(asked + 2).find(e => e.matches('.bubble')); \
                  if (!answer || !answer.matches('.bubble.out') || \
                    !answer.textContent.includes('Qual horário você quer remarcar?')) return 'no answer after the trace'; \
                  trace.querySelector('summary').click(); \
                  trace.scrollIntoView({ block: 'center' }); \
                  return trace.open ? 'ok' : 'closed';";
    assert_eq!(b.eval(script, vec![]).await, json!("ok"));
    let page = b.eval("return document.querySelector('main').innerText", vec![]).await;
    let page = page.as_str().unwrap_or_default();
    assert!(!page.contains("Enviada") && !page.contains("não enviada"), "{page}");
    b.screenshot("8-console-timeline").await;
}
