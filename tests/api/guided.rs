//! The guided (menu) agent end to end through webhook payloads: text, list and button clicks,
//! a replayed confirmation, "meus horários" and cancelling. Both databases.

use balcao::domain::TenantId;
use balcao::store::{BookingStore, CatalogStore, OutboxStore, TenantStore};
use balcao::whatsapp::OutboundMessage;
use serde_json::{Value, json};

use crate::contract;
use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb, test_config};
use crate::support::payloads::{bytes, envelope, text};
use crate::support::scenario::Scenario;

const FROM: &str = "5511999990001";

fn click(wamid: &str, kind: &str, id: &str) -> Value {
    json!({ "from": FROM, "id": wamid, "timestamp": "1", "type": "interactive",
            "context": { "from": "15550783881", "id": "wamid.menu" },
            "interactive": { "type": kind, kind: { "id": id, "title": "x" } } })
}

/// Sends one message, runs the turn, returns the bot's answer.
async fn say(db: &TestDb, app: &TestApp, s: &Scenario, message: Value) -> OutboundMessage {
    say_to(db, app, s.tenant.id, message).await
}

async fn say_to(db: &TestDb, app: &TestApp, tenant: TenantId, message: Value) -> OutboundMessage {
    assert_eq!(app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, FROM, vec![message]))).await.status(), 200);
    app.drain_turns().await;
    db.store.list_outbound(tenant).await.unwrap().last().unwrap().message.0.clone()
}

fn ids(m: &OutboundMessage) -> Vec<String> {
    match m {
        OutboundMessage::Buttons { buttons, .. } => buttons.iter().map(|b| b.id.clone()).collect(),
        OutboundMessage::List { sections, .. } => sections.iter().flat_map(|s| &s.rows).map(|r| r.id.clone()).collect(),
        OutboundMessage::Template { quick_replies, .. } => quick_replies.clone(),
        OutboundMessage::Text { .. }
        | OutboundMessage::QrImage { .. }
        | OutboundMessage::OrderDetails { .. }
        | OutboundMessage::OrderStatus { .. }
        | OutboundMessage::Location { .. } => vec![],
    }
}

contract!(book_and_cancel_through_menus, |db| async move {
    let s = Scenario::new(db).await;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;

    let menu = say(db, &app, &s, text("wamid.g1", FROM, "oi")).await;
    assert_eq!(ids(&menu), ["g:book", "g:mine"]);
    assert!(menu.body().contains("Barbearia do Zé"));

    let services = say(db, &app, &s, click("wamid.g2", "button_reply", "g:book")).await;
    assert!(ids(&services).contains(&format!("g:svc:{}", s.corte)));
    let pros = say(db, &app, &s, click("wamid.g3", "list_reply", &format!("g:svc:{}", s.corte))).await;
    assert_eq!(ids(&pros)[0], format!("g:pro:{}:0", s.corte));
    assert!(ids(&pros).contains(&format!("g:pro:{}:{}", s.corte, s.ze)));
    let days = say(db, &app, &s, click("wamid.g4", "list_reply", &format!("g:pro:{}:{}", s.corte, s.ze))).await;
    let day = ids(&days)[0].clone();
    assert!(day.starts_with(&format!("g:day:{}:{}:", s.corte, s.ze)), "{day}");
    let times = say(db, &app, &s, click("wamid.g5", "list_reply", &day)).await;
    let time = ids(&times)[0].clone();
    // Choosing a time proposes the booking: its buttons name a pending action.
    let confirm = say(db, &app, &s, click("wamid.g6", "list_reply", &time)).await;
    let ok = ids(&confirm)[0].clone();
    assert!(ok.starts_with("a:") && ok.ends_with(":y"), "{ok}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);

    let booked = say(db, &app, &s, click("wamid.g7", "button_reply", &ok)).await;
    assert!(booked.body().starts_with("Pronto!"), "{}", booked.body());
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    // The same click delivered again is a duplicate webhook; tapped again, it is already done.
    let before = db.store.list_outbound(s.tenant.id).await.unwrap().len();
    app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, FROM, vec![click("wamid.g7", "button_reply", &ok)]))).await;
    assert!(app.drain_turns().await.is_empty());
    assert_eq!(db.store.list_outbound(s.tenant.id).await.unwrap().len(), before);
    let again = say(db, &app, &s, click("wamid.g8", "button_reply", &ok)).await;
    assert!(again.body().contains("já foi confirmado"), "{}", again.body());
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);

    let mine = say(db, &app, &s, text("wamid.g9", FROM, "Meus horários")).await;
    let chosen = say(db, &app, &s, click("wamid.g9b", "list_reply", &ids(&mine)[0])).await;
    assert_eq!(ids(&chosen).len(), 3, "Remarcar, Cancelar horário, Voltar ao menu: {chosen:?}");
    let cancel = ids(&chosen)[1].clone();
    assert!(cancel.starts_with("g:cancel:"), "{cancel}");
    let sure = say(db, &app, &s, click("wamid.g10", "button_reply", &cancel)).await;
    let yes = ids(&sure)[0].clone();
    let cancelled = say(db, &app, &s, click("wamid.g11", "button_reply", &yes)).await;
    assert!(cancelled.body().starts_with("Pronto, o horário"), "{}", cancelled.body());
    let stale = say(db, &app, &s, click("wamid.g12", "button_reply", &yes)).await;
    assert!(stale.body().contains("já foi confirmado"), "{}", stale.body());
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);

    // Nonsense and forged ids bring back the menu.
    for (n, message) in
        [text("wamid.g13", FROM, "qual o sentido da vida?"), click("wamid.g14", "button_reply", "g:ok:x:y:z")]
            .into_iter()
            .enumerate()
    {
        let answer = say(db, &app, &s, message).await;
        assert_eq!(ids(&answer), ["g:book", "g:mine"], "case {n}: {}", answer.body());
    }
});

/// A service name of 80 characters, a professional's of 45, and more services than a list holds.
fn crowded_catalog() -> String {
    let hours =
        ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map(|d| format!("{d} = [\"08:00-23:00\"]")).join("\n");
    let extra: String = (1..=11)
        .map(|i| format!("[[services]]\nname = \"Serviço {i}\"\nduration_minutes = 30\nprice = \"10.00\"\n"))
        .collect();
    let all: Vec<String> =
        std::iter::once(LONG_SERVICE.to_owned()).chain((1..=11).map(|i| format!("Serviço {i}"))).collect();
    format!(
        "name = \"Barbearia do Zé\"\nslug = \"lotada\"\ntimezone = \"America/Sao_Paulo\"\n\
         [whatsapp]\nphone_number_id = \"{PHONE_NUMBER_ID}\"\n\
         [booking]\nmin_notice_minutes = 60\nhorizon_days = 30\nslot_step_minutes = 30\n\
         [[services]]\nname = \"{LONG_SERVICE}\"\nduration_minutes = 30\nprice = \"50.00\"\n{extra}\
         [[professionals]]\nname = \"{LONG_PROFESSIONAL}\"\nservices = {all:?}\n[professionals.hours]\n{hours}\n"
    )
}

const LONG_SERVICE: &str = "Corte masculino com barba completa, sobrancelha, hidratação e massagem relaxante";
const LONG_PROFESSIONAL: &str = "José Maria da Silva Albuquerque de Vasconcelos";

/// No ISO date (`2026-03-11`) anywhere a customer reads.
fn assert_no_iso_date(m: &OutboundMessage) {
    let mut seen = vec![m.body().to_owned()];
    if let OutboundMessage::List { sections, .. } = m {
        for r in sections.iter().flat_map(|s| &s.rows) {
            seen.push(r.title.clone());
            seen.extend(r.description.clone());
        }
    }
    for text in seen {
        let digits: Vec<bool> = text.chars().map(|c| c.is_ascii_digit()).collect();
        let chars: Vec<char> = text.chars().collect();
        let iso = (0..chars.len().saturating_sub(9)).any(|i| {
            digits[i..i + 4].iter().all(|d| *d)
                && chars[i + 4] == '-'
                && digits[i + 5]
                && digits[i + 6]
                && chars[i + 7] == '-'
        });
        assert!(!iso, "ISO date shown to a customer: {text}");
    }
}

/// Sends a click, checks the answer is an interactive message within limits, returns it.
async fn screen(db: &TestDb, app: &TestApp, t: TenantId, n: &mut u32, kind: &str, id: &str) -> OutboundMessage {
    *n += 1;
    let answer = say_to(db, app, t, click(&format!("wamid.crowded.{n}"), kind, id)).await;
    assert!(answer.validate().is_ok(), "{answer:?}");
    assert!(!matches!(answer, OutboundMessage::Text { .. }), "{id} fell back to text: {}", answer.body());
    assert_no_iso_date(&answer);
    answer
}

contract!(long_names_and_a_full_day_stay_within_limits, |db| async move {
    let spec = balcao::tenant::TenantSpec::parse(&crowded_catalog()).unwrap();
    let outcome = db.store.apply_tenant(&spec, chrono::Utc::now()).await.unwrap();
    db.store.apply_catalog(outcome.id(), &spec.catalog).await.unwrap();
    let tenant = db.store.tenant(outcome.id()).await.unwrap().unwrap();
    let t = tenant.id;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;
    let mut n = 0;

    // Twelve services: every one reachable through "Mais opções".
    let mut services = Vec::new();
    let mut page = "g:book".to_owned();
    loop {
        let list = screen(db, &app, t, &mut n, "button_reply", &page).await;
        let ids = ids(&list);
        services.extend(ids.iter().filter(|id| id.starts_with("g:svc:")).cloned());
        match ids.iter().find(|id| id.starts_with("g:book:")) {
            Some(next) => page = next.clone(),
            None => break,
        }
    }
    assert_eq!(services.len(), 12, "{services:?}");
    let long = db.store.catalog(t).await.unwrap().0.iter().find(|x| x.name == LONG_SERVICE).unwrap().id;
    let pros = screen(db, &app, t, &mut n, "list_reply", &format!("g:svc:{long}")).await;
    assert!(pros.body().contains(LONG_SERVICE), "{}", pros.body());
    let pro = ids(&pros)[1].clone();
    let days = screen(db, &app, t, &mut n, "list_reply", &pro).await;
    // Tomorrow or the day after: a full day of 08:00-23:00, thirty half hours.
    let day = ids(&days)[1].clone();

    let mut times = Vec::new();
    let mut page = day.clone();
    loop {
        let list = screen(db, &app, t, &mut n, "list_reply", &page).await;
        assert!(list.body().contains('/'), "the day is shown dd/mm: {}", list.body());
        let ids = ids(&list);
        times.extend(ids.iter().filter(|id| id.starts_with("g:time:")).cloned());
        match ids.iter().find(|id| id.starts_with("g:day:")) {
            Some(next) => page = next.clone(),
            None => break,
        }
    }
    assert_eq!(times.len(), 30, "{times:?}");
    let unique: std::collections::HashSet<_> = times.iter().collect();
    assert_eq!(unique.len(), 30);

    let confirm = screen(db, &app, t, &mut n, "list_reply", times.last().unwrap()).await;
    assert!(confirm.body().contains(LONG_SERVICE) && confirm.body().contains("22:30"), "{}", confirm.body());
    let booked = say_to(db, &app, t, click("wamid.crowded.book", "button_reply", &ids(&confirm)[0])).await;
    assert!(booked.body().starts_with("Pronto!") && booked.validate().is_ok(), "{}", booked.body());
    assert_no_iso_date(&booked);
    assert_eq!(db.store.count_active_appointments(t).await.unwrap(), 1);
    let mine = say_to(db, &app, t, text("wamid.crowded.mine", FROM, "meus horários")).await;
    assert!(mine.validate().is_ok() && ids(&mine)[0].starts_with("g:bk:"), "{mine:?}");
    assert_no_iso_date(&mine);
    let chosen = say_to(db, &app, t, click("wamid.crowded.chosen", "list_reply", &ids(&mine)[0])).await;
    assert!(chosen.validate().is_ok() && chosen.body().contains(LONG_PROFESSIONAL), "{chosen:?}");
    assert_no_iso_date(&chosen);

    // A crafted 10 KB click id is just not understood: the menu comes back.
    for (k, id) in [format!("g:time:{long}:1:{}", "9".repeat(10 * 1024)), "x".repeat(10 * 1024)].iter().enumerate() {
        let answer = say_to(db, &app, t, click(&format!("wamid.crafted.{k}"), "button_reply", id)).await;
        assert_eq!(ids(&answer), ["g:book", "g:mine"], "{}", answer.body());
    }
});

contract!(free_text_reaches_its_screen_or_is_told_it_was_not_understood, |db| async move {
    let s = Scenario::new(db).await;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;

    let lost = say(db, &app, &s, text("wamid.f1", FROM, "aceita cartão?")).await;
    assert!(lost.body().contains("Desculpe, não entendi sua mensagem."), "{}", lost.body());
    assert!(lost.body().contains("\"atendente\""), "{}", lost.body());
    assert_eq!(ids(&lost), ["g:book", "g:mine"], "with the menu");

    for (n, (words, first_id)) in
        [("qual o preço?", "g:svc:"), ("quero marcar um corte", "g:svc:"), ("tem horário amanhã", "g:svc:")]
            .into_iter()
            .enumerate()
    {
        let screen = say(db, &app, &s, text(&format!("wamid.f2{n}"), FROM, words)).await;
        assert!(ids(&screen)[0].starts_with(first_id), "{words}: {screen:?}");
    }
    let services = say(db, &app, &s, text("wamid.f3", FROM, "preço")).await;
    assert!(format!("{services:?}").contains("R$ 50,00"), "prices in Brazilian money: {services:?}");
    for (n, words) in ["meus horaros", "quero remarcar", "cancelar"].into_iter().enumerate() {
        let mine = say(db, &app, &s, text(&format!("wamid.f4{n}"), FROM, words)).await;
        assert!(mine.body().contains("não tem horários"), "{words}: {}", mine.body());
    }
    assert!(say(db, &app, &s, text("wamid.f5", FROM, "Bom dia!")).await.body().starts_with("Olá"));
});

contract!(any_professional_shows_each_time_once_and_books_whoever_is_free, |db| async move {
    let s = Scenario::new(db).await;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;
    let days = say(db, &app, &s, click("wamid.a1", "list_reply", &format!("g:pro:{}:0", s.corte))).await;
    // A Wednesday: Rafa works then too, so most times have two professionals free.
    let OutboundMessage::List { sections, .. } = &days else { panic!("days: {days:?}") };
    let wednesday = sections.iter().flat_map(|s| &s.rows).find(|r| r.title.contains("(qua)")).expect("a Wednesday");
    let times = say(db, &app, &s, click("wamid.a2", "list_reply", &wednesday.id)).await;
    let OutboundMessage::List { sections, .. } = &times else { panic!("times: {times:?}") };
    let titles: Vec<&str> = sections.iter().flat_map(|s| &s.rows).map(|r| r.title.as_str()).collect();
    let mut unique = titles.clone();
    unique.dedup();
    assert_eq!(titles, unique, "each time once");
    let confirm = say(db, &app, &s, click("wamid.a3", "list_reply", &ids(&times)[0])).await;
    let booked = say(db, &app, &s, click("wamid.a4", "button_reply", &ids(&confirm)[0])).await;
    assert!(booked.body().starts_with("Pronto!"), "{}", booked.body());
    assert_eq!(ids(&booked), ["g:mine", "g:book"], "where to go next");
    // The cancellation's buttons say what they do.
    let cancel = say(db, &app, &s, text("wamid.a5", FROM, "quero cancelar")).await;
    assert!(ids(&cancel)[0].starts_with("g:cancel:"), "\"cancelar\" lists what to cancel: {cancel:?}");
    let offer = say(db, &app, &s, click("wamid.a6", "list_reply", &ids(&cancel)[0])).await;
    let OutboundMessage::Buttons { buttons, .. } = &offer else { panic!("{offer:?}") };
    assert_eq!(buttons.iter().map(|b| b.title.as_str()).collect::<Vec<_>>(), ["Sim, cancelar", "Manter horário"]);
});

/// Books the first time the menu offers for Corte with Zé; the booking's start.
async fn book_first(db: &TestDb, app: &TestApp, s: &Scenario, tag: &str) -> chrono::DateTime<chrono::Utc> {
    let days = say(db, app, s, click(&format!("{tag}1"), "list_reply", &format!("g:pro:{}:{}", s.corte, s.ze))).await;
    let times = say(db, app, s, click(&format!("{tag}2"), "list_reply", &ids(&days)[0])).await;
    let confirm = say(db, app, s, click(&format!("{tag}3"), "list_reply", &ids(&times)[0])).await;
    let booked = say(db, app, s, click(&format!("{tag}4"), "button_reply", &ids(&confirm)[0])).await;
    assert!(booked.body().starts_with("Pronto!"), "{}", booked.body());
    starts(db, s).await[0]
}

/// The starts of the tenant's active appointments.
async fn starts(db: &TestDb, s: &Scenario) -> Vec<chrono::DateTime<chrono::Utc>> {
    let (from, to) =
        (chrono::Utc::now() - chrono::TimeDelta::days(1), chrono::Utc::now() + chrono::TimeDelta::days(60));
    let agenda = balcao::store::AgendaStore::agenda(&db.store, s.tenant.id, from, to).await.unwrap();
    agenda.into_iter().map(|(a, _, _)| a.starts_at).collect()
}

contract!(a_booking_is_moved_through_the_menu_only_on_confirmar, |db| async move {
    let s = Scenario::new(db).await;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;
    let before = book_first(db, &app, &s, "wamid.m").await;

    // "remarcar" lists the bookings to move; one chosen offers its days, then its times.
    let mine = say(db, &app, &s, text("wamid.m5", FROM, "preciso remarcar")).await;
    assert!(mine.body().contains("Qual horário você quer remarcar?"), "{}", mine.body());
    let booking = ids(&mine)[0].clone();
    assert!(booking.starts_with("g:mv:"), "{booking}");
    let days = say(db, &app, &s, click("wamid.m6", "list_reply", &booking)).await;
    assert!(days.body().contains("remarcar"), "{}", days.body());
    let day = ids(&days).last().unwrap().clone();
    assert!(day.starts_with("g:mvday:"), "{day}");
    let times = say(db, &app, &s, click("wamid.m7", "list_reply", &day)).await;
    let time = ids(&times)[0].clone();
    assert!(time.starts_with("g:mvtime:"), "{time}");
    let offer = say(db, &app, &s, click("wamid.m8", "list_reply", &time)).await;
    assert!(offer.body().starts_with("Confirma a remarcação de Corte masculino com Zé de "), "{}", offer.body());
    let OutboundMessage::Buttons { buttons, .. } = &offer else { panic!("{offer:?}") };
    assert_eq!(buttons.iter().map(|b| b.title.as_str()).collect::<Vec<_>>(), ["Confirmar", "Manter horário"]);
    assert_eq!(starts(db, &s).await, [before], "nothing moves before Confirmar");

    // The same time chosen again offers it anew, replacing the first offer; Confirmar moves once.
    let again = say(db, &app, &s, click("wamid.m9", "list_reply", &time)).await;
    let stale = say(db, &app, &s, click("wamid.m9b", "button_reply", &buttons[0].id)).await;
    assert!(stale.body().contains("substituída"), "{}", stale.body());
    assert_eq!(starts(db, &s).await, [before]);
    let OutboundMessage::Buttons { buttons, .. } = &again else { panic!("{again:?}") };
    let moved = say(db, &app, &s, click("wamid.m10", "button_reply", &buttons[0].id)).await;
    assert!(moved.body().starts_with("Pronto, seu horário agora é"), "{}", moved.body());
    assert_eq!(ids(&moved), ["g:mine", "g:book"], "where to go next");
    let after = starts(db, &s).await;
    assert_eq!(after.len(), 1, "moved, not booked twice");
    assert_ne!(after[0], before);
    // The new time's row tapped again: already there, no second offer.
    let there = say(db, &app, &s, click("wamid.m10b", "list_reply", &time)).await;
    assert!(there.body().contains("já está confirmado"), "{}", there.body());
    let twice = say(db, &app, &s, click("wamid.m11", "button_reply", &buttons[0].id)).await;
    assert!(twice.body().contains("já foi confirmado"), "{}", twice.body());
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);

    // "Manter horário" on a new proposal leaves it where it is.
    let mine = say(db, &app, &s, click("wamid.m12", "button_reply", "g:mine")).await;
    let chosen = say(db, &app, &s, click("wamid.m13", "list_reply", &ids(&mine)[0])).await;
    let days = say(db, &app, &s, click("wamid.m14", "button_reply", &ids(&chosen)[0])).await;
    let times = say(db, &app, &s, click("wamid.m15", "list_reply", &ids(&days)[0])).await;
    let offer = say(db, &app, &s, click("wamid.m16", "list_reply", &ids(&times)[0])).await;
    let keep = say(db, &app, &s, click("wamid.m17", "button_reply", &ids(&offer)[1])).await;
    assert!(keep.body().contains("não fiz nada"), "{}", keep.body());
    assert_eq!(starts(db, &s).await, after);
});

contract!(endereco_answers_with_the_location_pin_or_says_it_is_missing, |db| async move {
    let s = Scenario::new(db).await;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;

    let missing = say(db, &app, &s, text("wamid.e1", FROM, "qual o endereço?")).await;
    assert!(missing.body().contains("Não tenho o endereço"), "{}", missing.body());
    assert!(missing.body().contains("atendente"), "{}", missing.body());

    let file = crate::support::scenario::catalog_file(
        "barbearia",
        crate::support::common::PHONE_NUMBER_ID,
        "America/Sao_Paulo",
    ) + "\n[address]\ntext = \"Rua Augusta, 1500 - Consolação, São Paulo - SP\"\nlatitude = -23.5558\nlongitude = -46.6622\n";
    let spec = balcao::tenant::TenantSpec::parse(&file).unwrap();
    db.store.apply_tenant(&spec, chrono::Utc::now()).await.unwrap();
    app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, FROM, vec![text("wamid.e2", FROM, "onde fica?")]))).await;
    app.drain_turns().await;
    let sent = db.store.list_outbound(s.tenant.id).await.unwrap();
    let (pin, text_after) = (&sent[sent.len() - 2].message.0, &sent[sent.len() - 1].message.0);
    let OutboundMessage::Location { latitude, longitude, name, address } = pin else { panic!("{pin:?}") };
    assert_eq!((latitude.as_str(), longitude.as_str()), ("-23.5558", "-46.6622"));
    assert_eq!(name.as_deref(), Some("Barbearia do Zé"));
    assert_eq!(address.as_deref(), Some("Rua Augusta, 1500 - Consolação, São Paulo - SP"));
    assert!(text_after.body().contains("Rua Augusta, 1500"), "{}", text_after.body());
    assert_eq!(ids(text_after), ["g:book", "g:mine"], "with the menu");
    // Only coordinates on the map are accepted.
    let bad = file.replace("-46.6622", "-246.6622");
    let refused = balcao::tenant::TenantSpec::parse(&bad).unwrap_err().to_string();
    assert!(refused.contains("longitude"), "{refused}");
    let half = file.replace("longitude = -46.6622\n", "");
    assert!(balcao::tenant::TenantSpec::parse(&half).unwrap_err().to_string().contains("both"));
});
