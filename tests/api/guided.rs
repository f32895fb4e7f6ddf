//! The guided (menu) agent end to end through webhook payloads: text, list and button clicks,
//! a replayed confirmation, "meus horários" and cancelling. Both databases.

use balcao::store::{BookingStore, OutboxStore};
use balcao::whatsapp::OutboundMessage;
use serde_json::{Value, json};

use crate::common::{PHONE_NUMBER_ID, TestApp, TestDb, test_config};
use crate::contract;
use crate::payloads::{bytes, envelope, text};
use crate::scenario::Scenario;

const FROM: &str = "5511999990001";

fn click(wamid: &str, kind: &str, id: &str) -> Value {
    json!({ "from": FROM, "id": wamid, "timestamp": "1", "type": "interactive",
            "context": { "from": "15550783881", "id": "wamid.menu" },
            "interactive": { "type": kind, kind: { "id": id, "title": "x" } } })
}

/// Sends one message, runs the turn, returns the bot's answer.
async fn say(db: &TestDb, app: &TestApp, s: &Scenario, message: Value) -> OutboundMessage {
    assert_eq!(app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, FROM, vec![message]))).await.status(), 200);
    app.drain_turns().await;
    db.store.list_outbound(s.tenant.id).await.unwrap().last().unwrap().message.0.clone()
}

fn ids(m: &OutboundMessage) -> Vec<String> {
    match m {
        OutboundMessage::Buttons { buttons, .. } => buttons.iter().map(|b| b.id.clone()).collect(),
        OutboundMessage::List { sections, .. } => sections.iter().flat_map(|s| &s.rows).map(|r| r.id.clone()).collect(),
        OutboundMessage::Text { .. } => vec![],
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
    let confirm = say(db, &app, &s, click("wamid.g6", "list_reply", &time)).await;
    let ok = ids(&confirm)[0].clone();
    assert!(ok.starts_with("g:ok:"), "{ok}");

    let booked = say(db, &app, &s, click("wamid.g7", "button_reply", &ok)).await;
    assert!(booked.body().starts_with("Pronto!"), "{}", booked.body());
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    // The same click delivered again is a duplicate webhook; tapped again, it is already done.
    let before = db.store.list_outbound(s.tenant.id).await.unwrap().len();
    app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, FROM, vec![click("wamid.g7", "button_reply", &ok)]))).await;
    assert!(app.drain_turns().await.is_empty());
    assert_eq!(db.store.list_outbound(s.tenant.id).await.unwrap().len(), before);
    let again = say(db, &app, &s, click("wamid.g8", "button_reply", &ok)).await;
    assert!(again.body().contains("já está confirmado"), "{}", again.body());
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);

    let mine = say(db, &app, &s, text("wamid.g9", FROM, "Meus horários")).await;
    let cancel = ids(&mine)[0].clone();
    assert!(cancel.starts_with("g:cancel:"), "{cancel}");
    let sure = say(db, &app, &s, click("wamid.g10", "list_reply", &cancel)).await;
    let yes = ids(&sure)[0].clone();
    let cancelled = say(db, &app, &s, click("wamid.g11", "button_reply", &yes)).await;
    assert!(cancelled.body().starts_with("Cancelado"), "{}", cancelled.body());
    let stale = say(db, &app, &s, click("wamid.g12", "button_reply", &yes)).await;
    assert!(stale.body().contains("já tinha sido cancelado"), "{}", stale.body());
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
