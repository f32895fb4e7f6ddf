//! Reminders before appointments and the template-button path: sent once per appointment and
//! start, as a template outside the 24-hour window; "Confirmo" records attendance, "Preciso
//! cancelar" offers the cancellation (its own buttons). Also: an expired proposal is announced
//! once. Both databases.

use balcao::store::{BookingStore, OutboxStore};
use balcao::whatsapp::OutboundMessage;
use chrono::{DateTime, Datelike, TimeDelta, Utc, Weekday};
use serde_json::{Value, json};

use crate::contract;
use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb, local_test_config};
use crate::support::payloads::{bytes, envelope};
use crate::support::scenario::{Scenario, catalog_file, local_replier, now};

const CUSTOMER: &str = "5511999990001";

fn tenant_file() -> String {
    catalog_file("barbearia", PHONE_NUMBER_ID, "America/Sao_Paulo").replacen(
        "[booking]",
        "[reminders]\nhours_before = 24\ntemplate = { name = \"lembrete_horario\", language = \"pt_BR\" }\n[booking]",
        1,
    )
}

/// 14:00 and 15:00 in São Paulo on a weekday at least three days ahead.
fn two_slots() -> (String, String) {
    let mut day = (Utc::now() + TimeDelta::days(3)).date_naive();
    while matches!(day.weekday(), Weekday::Sat | Weekday::Sun) {
        day = day.succ_opt().unwrap();
    }
    (format!("{day}T14:00:00-03:00"), format!("{day}T15:00:00-03:00"))
}

fn quick_reply(wamid: &str, payload: &str) -> Value {
    json!({ "from": CUSTOMER, "id": wamid, "timestamp": "1", "type": "button",
            "context": { "from": "15550783881", "id": "wamid.reminder" },
            "button": { "payload": payload, "text": "x" } })
}

async fn outbox(db: &TestDb, s: &Scenario) -> Vec<OutboundMessage> {
    db.store.outbound_for_wa_id(s.tenant.id, CUSTOMER, 0).await.unwrap().into_iter().map(|r| r.message.0).collect()
}

contract!(a_reminder_goes_once_and_its_buttons_confirm_or_offer_the_cancel, |db| async move {
    let s = Scenario::from_file(db, &tenant_file()).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    let c = s.customer(db, CUSTOMER).await;
    let (first, second) = two_slots();
    let mut ids = Vec::new();
    for start in [&first, &second] {
        let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": start });
        match s.call_at(&c, "create_booking", input, Utc::now()).await {
            balcao::ledger::Outcome::Executed(v) => ids.push(v["booking_id"].as_i64().unwrap()),
            other => panic!("{other:?}"),
        }
    }
    let due = DateTime::parse_from_rfc3339(&first).unwrap().with_timezone(&Utc) - TimeDelta::hours(23);

    // Not yet due a day and a half before; then sent once, however often the sweep runs.
    assert_eq!(
        balcao::reminders::send_due(&db.store, &local_replier(db), due - TimeDelta::hours(12)).await.unwrap(),
        0
    );
    assert_eq!(balcao::reminders::send_due(&db.store, &local_replier(db), due).await.unwrap(), 2);
    assert_eq!(balcao::reminders::send_due(&db.store, &local_replier(db), due).await.unwrap(), 0);

    // The customer last wrote days before: the reminders are the tenant's template.
    let templates: Vec<(Vec<String>, Vec<String>)> = outbox(db, &s)
        .await
        .into_iter()
        .filter_map(|m| match m {
            OutboundMessage::Template { name, body_params, quick_replies, .. } => {
                assert_eq!(name, "lembrete_horario");
                Some((body_params, quick_replies))
            }
            _ => None,
        })
        .collect();
    assert_eq!(templates.len(), 2);
    assert_eq!(templates[0].0[0], "Barbearia do Zé");

    // "Confirmo" on the first: attendance recorded, told once.
    assert_eq!(post(&app, quick_reply("wamid.r.1", &templates[0].1[0])).await, 200);
    app.drain_turns().await;
    assert!(outbox(db, &s).await.last().unwrap().body().contains("presença"), "{:?}", outbox(db, &s).await.last());

    // "Preciso cancelar" on the second: the cancellation is offered, nothing cancelled yet.
    assert_eq!(post(&app, quick_reply("wamid.r.2", &templates[1].1[1])).await, 200);
    app.drain_turns().await;
    let offer = outbox(db, &s).await.pop().unwrap();
    let OutboundMessage::Buttons { buttons, body, .. } = &offer else { panic!("{offer:?}") };
    assert!(body.contains("cancelamento"), "{body}");
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 2);
    assert_eq!(post(&app, quick_reply("wamid.r.3", &buttons[0].id)).await, 200);
    app.drain_turns().await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);

    // Moved to a later start, the remaining appointment is reminded again for the new time;
    // the cancelled one never is.
    let later = (DateTime::parse_from_rfc3339(&first).unwrap() + TimeDelta::hours(2)).to_rfc3339();
    let moved =
        s.call_at(&c, "reschedule_booking", json!({ "booking_id": ids[0], "starts_at": later }), Utc::now()).await;
    assert!(matches!(moved, balcao::ledger::Outcome::Executed(_)), "{moved:?}");
    let sent = balcao::reminders::send_due(&db.store, &local_replier(db), due + TimeDelta::hours(2)).await.unwrap();
    assert_eq!(sent, 1);
});

// The due test lives in the sweep's query: a booking made after its reminder was due (four
// days ahead, a tenant reminding five days before) gets none, then or later; the same booking
// with reminders off gets none; under a tenant reminding a day before, one when that day comes.
contract!(a_booking_made_inside_its_reminder_window_gets_none, |db| async move {
    let file = |hours: u32| tenant_file().replace("hours_before = 24", &format!("hours_before = {hours}"));
    let s = Scenario::from_file(db, &file(120)).await;
    let c = s.customer(db, CUSTOMER).await;
    let (first, _) = two_slots();
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": first });
    let booked = s.call_at(&c, "create_booking", input, Utc::now()).await;
    assert!(matches!(booked, balcao::ledger::Outcome::Executed(_)), "{booked:?}");
    let start = DateTime::parse_from_rfc3339(&first).unwrap().with_timezone(&Utc);

    for at in [Utc::now(), start - TimeDelta::hours(23), start - TimeDelta::minutes(1)] {
        assert_eq!(balcao::reminders::send_due(&db.store, &local_replier(db), at).await.unwrap(), 0, "at {at}");
    }
    // The tenant file again: with reminders off, none; reminding a day before, one when that
    // day comes, not earlier.
    let due = start - TimeDelta::hours(24);
    Scenario::from_file(db, &file(0)).await;
    assert_eq!(balcao::reminders::send_due(&db.store, &local_replier(db), due).await.unwrap(), 0);
    let s = Scenario::from_file(db, &file(24)).await;
    assert_eq!(
        balcao::reminders::send_due(&db.store, &local_replier(db), due - TimeDelta::minutes(1)).await.unwrap(),
        0
    );
    assert_eq!(balcao::reminders::send_due(&db.store, &local_replier(db), due).await.unwrap(), 1);
    assert_eq!(outbox(db, &s).await.len(), 1);
});

// A reminder that fails holds back none after it: a tenant whose stored time zone no longer
// parses is due first, and the other tenant's customer is still reminded by the same sweep.
contract!(a_failing_reminder_holds_back_none_after_it, |db| async move {
    let broken = Scenario::from_file(db, &tenant_file()).await;
    let other =
        tenant_file().replace("slug = \"barbearia\"", "slug = \"salao\"").replace(PHONE_NUMBER_ID, "106540352242923");
    let s = Scenario::from_file(db, &other).await;
    let (first, second) = two_slots();
    for (scenario, start) in [(&broken, &first), (&s, &second)] {
        let c = scenario.customer(db, CUSTOMER).await;
        let input = json!({ "service_id": scenario.corte, "professional_id": scenario.ze, "starts_at": start });
        let booked = scenario.call_at(&c, "create_booking", input, Utc::now()).await;
        assert!(matches!(booked, balcao::ledger::Outcome::Executed(_)), "{booked:?}");
    }
    crate::raw_pool!(db, pool => sqlx::query("UPDATE tenants SET timezone = 'Mars/Olympus' WHERE id = $1")
        .bind(broken.tenant.id.0).execute(&pool).await.unwrap().rows_affected());

    let due = DateTime::parse_from_rfc3339(&second).unwrap().with_timezone(&Utc) - TimeDelta::hours(23);
    let swept = balcao::reminders::send_due(&db.store, &local_replier(db), due).await;
    assert!(swept.is_err(), "the broken tenant's failure is reported: {swept:?}");
    assert_eq!(outbox(db, &s).await.len(), 1, "the other tenant's customer is reminded");
    assert!(outbox(db, &broken).await.is_empty());
});

contract!(an_expired_proposal_is_announced_once, |db| async move {
    let s = Scenario::new(db).await;
    let c = s.customer(db, CUSTOMER).await;
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" });
    let booked = match s.call(&c, "create_booking", input).await {
        balcao::ledger::Outcome::Executed(v) => v,
        other => panic!("{other:?}"),
    };
    // Proposed on the scenario's clock (March 2026): long expired by now.
    let proposal = s.call(&c, "cancel_booking", json!({ "booking_id": booked["booking_id"] })).await;
    assert!(matches!(proposal, balcao::ledger::Outcome::Executed(_)), "{proposal:?}");
    assert!(now() < Utc::now());
    assert_eq!(balcao::actions::expire_due(&db.store, &local_replier(db)).await.unwrap(), 1);
    assert_eq!(balcao::actions::expire_due(&db.store, &local_replier(db)).await.unwrap(), 0);
    let notices = outbox(db, &s).await.into_iter().filter(|m| m.body().contains("expirou")).count();
    assert_eq!(notices, 1);
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
});

async fn post(app: &TestApp, message: Value) -> reqwest::StatusCode {
    app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, CUSTOMER, vec![message]))).await.status()
}
