//! The console's agenda on both databases: the day and week grids, an appointment's detail and
//! history, and the merchant's cancel and move through the ledger (the customer told once,
//! refusals shown), tenant scoping, login and CSRF, and escaping of customer names.

use balcao::domain::ContactId;
use balcao::ledger::Outcome;
use balcao::store::{BookingStore, ConsoleAgendaStore, InboundStore, JobKind, Recorded};
use balcao::whatsapp::{ContactIdentity, InboundContent, NewInbound};
use chrono::{Datelike, Days, NaiveDate, Utc, Weekday};
use reqwest::StatusCode;
use serde_json::json;

use crate::contract;
use crate::support::clicks::inbox;
use crate::support::clicks::told;
use crate::support::common::{TestApp, TestDb, local_test_config};
use crate::support::console::Console;
use crate::support::queue::timing;
use crate::support::scenario::{Customer, Scenario};

const SLUG: &str = "barbearia";

/// The scenario's tenant served, and its owner logged in.
async fn setup(db: &TestDb) -> (Scenario, TestApp, Console) {
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", SLUG).await;
    (s, app, console)
}

/// A customer who wrote once, just now, under `name`.
async fn customer(db: &TestDb, s: &Scenario, phone: &str, name: &str) -> Customer {
    customer_at(db, s, phone, name, Utc::now()).await
}

/// A customer who wrote once, at `at`.
async fn customer_at(db: &TestDb, s: &Scenario, phone: &str, name: &str, at: chrono::DateTime<Utc>) -> Customer {
    let message = NewInbound {
        provider_message_id: format!("wamid.{phone}.{}", uuid::Uuid::new_v4()),
        contact: ContactIdentity {
            wa_id: Some(balcao::domain::PhoneE164::parse(phone).unwrap()),
            user_id: None,
            username: None,
            profile_name: Some(name.to_owned()),
        },
        content: InboundContent::Text { body: "oi".into() },
        context_id: None,
        sent_at: None,
        raw: json!({}),
        simulated_by: None,
        sender_hashes: Vec::new(),
    };
    let recorded = db.store.record_inbound(s.tenant.id, &message, JobKind::Turn, &timing(0, 0, 5), at).await.unwrap();
    let Recorded::New { conversation, .. } = recorded else { panic!("duplicate") };
    let contact: ContactId = db.store.conversation_contact(s.tenant.id, conversation).await.unwrap().contact_id;
    Customer { contact, conversation }
}

/// The next `weekday` at least two days ahead, in São Paulo.
fn next(weekday: Weekday) -> NaiveDate {
    let tz: chrono_tz::Tz = "America/Sao_Paulo".parse().unwrap();
    let mut d = Utc::now().with_timezone(&tz).date_naive() + Days::new(2);
    while d.weekday() != weekday {
        d = d + Days::new(1);
    }
    d
}

/// Books `c` with `professional` for the corte at `day` `hh:mm` São Paulo time; the booking id.
async fn book(s: &Scenario, c: &Customer, professional: i64, day: NaiveDate, hhmm: &str) -> i64 {
    let input = json!({ "service_id": s.corte, "professional_id": professional,
                        "starts_at": format!("{day}T{hhmm}:00-03:00") });
    match s.call_at(c, "create_booking", input, Utc::now()).await {
        Outcome::Executed(v) => v["booking_id"].as_i64().unwrap(),
        other => panic!("booking failed: {other:?}"),
    }
}

/// The opening tag of the agenda block of appointment `id`.
fn block(html: &str, id: i64) -> String {
    let at = html.find(&format!("data-appointment=\"{id}\"")).unwrap_or_else(|| panic!("no block {id}: {html}"));
    let start = html[..at].rfind('<').unwrap();
    let end = at + html[at..].find('>').unwrap();
    html[start..=end].to_owned()
}

contract!(the_day_grid_shows_a_booking_in_its_professionals_column_at_local_time, |db| async move {
    let (s, _app, console) = setup(db).await;
    let ana = customer(db, &s, "5511999990001", "Ana").await;
    let wed = next(Weekday::Wed);
    let id = book(&s, &ana, s.rafa, wed, "10:30").await;
    let other = book(&s, &customer(db, &s, "5511999990002", "Bia").await, s.ze, wed, "09:00").await;

    let page = console.get(&format!("/admin/{SLUG}/agenda?date={wed}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    // Zé is the first column (grid line 2), Rafa the second (line 3).
    let tag = block(&page.body, id);
    assert!(tag.contains(&format!("data-professional=\"{}\"", s.rafa)), "{tag}");
    assert!(tag.contains(&format!("data-local-start=\"{wed}T10:30\"")), "{tag}");
    assert!(tag.contains("grid-column: 3;"), "{tag}");
    assert!(tag.contains(&format!("href=\"/admin/{SLUG}/appointments/{id}\"")), "{tag}");
    assert!(block(&page.body, other).contains("grid-column: 2;"));
    // Rows every 30 minutes from 09:00: 10:30 starts on line 5; 40 minutes span two rows.
    assert!(tag.contains("grid-row: 5 / 7"), "{tag}");
    assert!(page.body.contains("Ana · Corte masculino") && page.body.contains("confirmado"));

    // Another day shows neither; the default (today) answers too.
    let day_before = wed - Days::new(1);
    let page = console.get(&format!("/admin/{SLUG}/agenda?date={day_before}")).await;
    assert!(!page.body.contains(&format!("data-appointment=\"{id}\"")));
    assert_eq!(console.get(&format!("/admin/{SLUG}/agenda")).await.status, StatusCode::OK);
    assert_eq!(console.get(&format!("/admin/{SLUG}/agenda?date=ontem")).await.status, StatusCode::BAD_REQUEST);
});

contract!(the_week_grid_has_a_column_per_day_for_each_professional, |db| async move {
    let (s, _app, console) = setup(db).await;
    let ana = customer(db, &s, "5511999990001", "Ana").await;
    let tue = next(Weekday::Tue);
    let thu = tue + Days::new(2);
    let first = book(&s, &ana, s.ze, tue, "09:00").await;
    let second = book(&s, &ana, s.ze, thu, "14:00").await;

    let page = console.get(&format!("/admin/{SLUG}/agenda?date={tue}&view=week")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("Semana de") && page.body.contains("<h2>Zé</h2>") && page.body.contains("<h2>Rafa</h2>")
    );
    // Monday is column line 2: Tuesday 3, Thursday 5.
    let tag = block(&page.body, first);
    assert!(tag.contains("grid-column: 3;") && tag.contains(&format!("data-local-start=\"{tue}T09:00\"")), "{tag}");
    let tag = block(&page.body, second);
    assert!(tag.contains("grid-column: 5;") && tag.contains(&format!("data-local-start=\"{thu}T14:00\"")), "{tag}");
    // Navigation moves a week.
    let next_week = tue + Days::new(7);
    assert!(page.body.contains(&format!("date={next_week}&#38;view=week")), "next week link");
});

contract!(the_detail_shows_the_ledger_key_and_the_conversation, |db| async move {
    let (s, _app, console) = setup(db).await;
    let ana = customer(db, &s, "5511999990001", "Ana").await;
    let id = book(&s, &ana, s.ze, next(Weekday::Tue), "10:00").await;
    let key = db.store.appointment_detail(s.tenant.id, id).await.unwrap().unwrap().idempotency_key.unwrap();

    let page = console.get(&format!("/admin/{SLUG}/appointments/{id}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(key.starts_with("create_booking/"), "{key}");
    assert!(page.body.contains(&key), "the ledger key is shown");
    assert!(page.body.contains(&format!("/admin/{SLUG}/conversations/{}", ana.conversation.0)));
    assert!(page.body.contains("create_booking") && page.body.contains("succeeded"));
    assert!(page.body.contains("Corte masculino") && page.body.contains("Zé") && page.body.contains("R$ 50,00"));

    // Unknown ids are not found.
    assert_eq!(console.get(&format!("/admin/{SLUG}/appointments/999999")).await.status, StatusCode::NOT_FOUND);
});

contract!(a_console_cancel_cancels_once_and_tells_the_customer_once, |db| async move {
    let (s, _app, console) = setup(db).await;
    let ana = customer(db, &s, "5511999990001", "Ana").await;
    let id = book(&s, &ana, s.ze, next(Weekday::Tue), "10:00").await;
    let path = format!("/admin/{SLUG}/appointments/{id}");
    console.get(&path).await;

    let done = console.post(&format!("{path}/cancel"), &[]).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER);
    assert_eq!(done.location.as_deref(), Some(format!("{path}?ok=cancelled").as_str()));
    assert_eq!(db.store.appointment(s.tenant.id, id).await.unwrap().unwrap().status, "cancelled");
    // Repeated (a double click, a resubmitted form): nothing more happens, nothing more is sent.
    let again = console.post(&format!("{path}/cancel"), &[]).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    let messages = inbox(db, s.tenant.id, "5511999990001").await;
    assert_eq!(told(&messages, "Precisamos cancelar o seu horário de Corte masculino"), 1, "{messages:?}");

    let page = console.get(&format!("{path}?ok=cancelled")).await;
    assert!(page.body.contains("Agendamento cancelado"), "{}", page.body);
    assert!(page.body.contains("console_cancel_booking") && page.body.contains("console: dono@barbearia.com"));
    assert!(!page.body.contains("/cancel\""), "no cancel form once cancelled");
});

contract!(outside_the_24_hour_window_the_merchant_is_told_the_customer_was_not, |db| async move {
    let (s, _app, console) = setup(db).await;
    let ana = customer_at(db, &s, "5511999990001", "Ana", Utc::now() - chrono::TimeDelta::days(2)).await;
    let id = book(&s, &ana, s.ze, next(Weekday::Tue), "10:00").await;
    let path = format!("/admin/{SLUG}/appointments/{id}");
    console.get(&path).await;

    let done = console.post(&format!("{path}/cancel"), &[]).await;
    assert_eq!(done.location.as_deref(), Some(format!("{path}?ok=cancelled_untold").as_str()));
    assert_eq!(db.store.appointment(s.tenant.id, id).await.unwrap().unwrap().status, "cancelled");
    // WhatsApp would refuse free-form text now: nothing is queued to fail later.
    assert!(inbox(db, s.tenant.id, "5511999990001").await.is_empty());
    let page = console.get(&format!("{path}?ok=cancelled_untold")).await;
    assert!(page.body.contains("NÃO foi avisado"), "{}", page.body);
});

contract!(a_console_move_moves_refuses_a_taken_slot_and_tells_once, |db| async move {
    let (s, _app, console) = setup(db).await;
    let ana = customer(db, &s, "5511999990001", "Ana").await;
    let bia = customer(db, &s, "5511999990002", "Bia").await;
    let tue = next(Weekday::Tue);
    let id = book(&s, &ana, s.ze, tue, "10:00").await;
    book(&s, &bia, s.ze, tue, "11:00").await;
    let path = format!("/admin/{SLUG}/appointments/{id}");
    console.get(&path).await;

    // Onto Bia's time: refused, shown on the page, nothing changed.
    let refused = console.post(&format!("{path}/move"), &[("date", &tue.to_string()), ("time", "11:00")]).await;
    assert_eq!(refused.location.as_deref(), Some(format!("{path}?erro=slot_taken").as_str()));
    let page = console.get(refused.location.as_deref().unwrap()).await;
    assert!(page.body.contains("Esse horário já está ocupado"), "{}", page.body);
    // Outside hours: refused too.
    let closed = console.post(&format!("{path}/move"), &[("date", &tue.to_string()), ("time", "22:00")]).await;
    assert_eq!(closed.location.as_deref(), Some(format!("{path}?erro=not_available").as_str()));

    // To 14:00, twice: moved once (the second finds it there already), told once.
    let to_14 = [("date", tue.to_string()), ("time", "14:00".to_owned())];
    let to_14: Vec<(&str, &str)> = to_14.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let moved = console.post(&format!("{path}/move"), &to_14).await;
    assert_eq!(moved.location.as_deref(), Some(format!("{path}?ok=moved").as_str()));
    let again = console.post(&format!("{path}/move"), &to_14).await;
    assert_eq!(again.location.as_deref(), Some(format!("{path}?erro=same").as_str()));
    let a = db.store.appointment(s.tenant.id, id).await.unwrap().unwrap();
    assert_eq!(a.starts_at.to_rfc3339(), format!("{tue}T17:00:00+00:00"));
    let moved = |m: &[balcao::whatsapp::OutboundMessage]| told(m, "foi remarcado para");
    assert_eq!(moved(&inbox(db, s.tenant.id, "5511999990001").await), 1);

    // To Rafa on Wednesday: another professional.
    let wed = tue + Days::new(1);
    let page = console
        .post(
            &format!("{path}/move"),
            &[("date", &wed.to_string()), ("time", "10:00"), ("professional", &s.rafa.to_string())],
        )
        .await;
    assert_eq!(page.location.as_deref(), Some(format!("{path}?ok=moved").as_str()));
    let a = db.store.appointment(s.tenant.id, id).await.unwrap().unwrap();
    assert_eq!((a.professional_id, a.starts_at.to_rfc3339()), (s.rafa, format!("{wed}T13:00:00+00:00")));
    let messages = inbox(db, s.tenant.id, "5511999990001").await;
    assert_eq!(moved(&messages), 2);
    assert!(messages.last().unwrap().body().contains("com Rafa"), "{:?}", messages.last());
    // Rafa does not do the barba: a move never changes the service.
    assert_eq!(a.service_id, s.corte);
});

contract!(another_tenants_appointment_is_not_found_and_forms_need_csrf, |db| async move {
    let (s, app, console) = setup(db).await;
    let ana = customer(db, &s, "5511999990001", "Ana").await;
    let id = book(&s, &ana, s.ze, next(Weekday::Tue), "10:00").await;
    let other = db.tenant_with("999000111", "outra-loja", None).await;
    let stranger = Console::login_new(db, &app.url, "dona@outra.com", &other.slug).await;
    let theirs = format!("/admin/{}/appointments/{id}", other.slug);
    assert_eq!(stranger.get(&theirs).await.status, StatusCode::NOT_FOUND);
    stranger.get(&format!("/admin/{}/agenda", other.slug)).await;
    assert_eq!(stranger.post(&format!("{theirs}/cancel"), &[]).await.status, StatusCode::NOT_FOUND);
    // Nor through the right slug by someone who is not a member.
    assert_eq!(stranger.get(&format!("/admin/{SLUG}/appointments/{id}")).await.status, StatusCode::NOT_FOUND);

    // Without the form token nothing happens.
    let path = format!("/admin/{SLUG}/appointments/{id}");
    console.get(&path).await;
    assert_eq!(console.post_raw(&format!("{path}/cancel"), &[]).await.status, StatusCode::FORBIDDEN);
    let forged = console.post_raw(&format!("{path}/move"), &[("authenticity_token", "AAAA"), ("time", "14:00")]).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(db.store.appointment(s.tenant.id, id).await.unwrap().unwrap().status, "confirmed");
    assert!(inbox(db, s.tenant.id, "5511999990001").await.is_empty());

    // Without a session, every page sends to the login.
    let anonymous = Console::new(&app.url);
    for page in ["agenda", "agenda?view=week", &format!("appointments/{id}")] {
        let answer = anonymous.get(&format!("/admin/{SLUG}/{page}")).await;
        assert_eq!(answer.location.as_deref(), Some("/admin/login"), "{page}");
    }
    anonymous.get("/admin/login").await; // a valid CSRF token, still no session
    assert_eq!(anonymous.post(&format!("{path}/cancel"), &[]).await.location.as_deref(), Some("/admin/login"));
});

contract!(html_in_a_customers_name_is_escaped, |db| async move {
    let (s, _app, console) = setup(db).await;
    let name = "<script>alert('x')</script> & Cia";
    let mallory = customer(db, &s, "5511999990003", name).await;
    let tue = next(Weekday::Tue);
    let id = book(&s, &mallory, s.ze, tue, "15:00").await;
    for path in [format!("/admin/{SLUG}/agenda?date={tue}"), format!("/admin/{SLUG}/appointments/{id}")] {
        let page = console.get(&path).await;
        assert_eq!(page.status, StatusCode::OK);
        assert!(!page.body.contains("<script>"), "{path}: {}", page.body);
        assert!(page.body.contains("&#60;script&#62;alert(&#39;x&#39;)&#60;/script&#62; &#38; Cia"), "{path}");
    }
});
