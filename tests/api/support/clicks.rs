//! Buttons and clicks as Meta delivers them, and a merchant's charge proposed through the guided
//! "Nova cobrança" form (with the customer's CPF when the gateway asks for it), and a refund
//! asked through "Devolver um Pix".

use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb};
use crate::support::payloads::{bytes, envelope, now, text};
use crate::support::scenario::{STAFF, Scenario};
use balcao::domain::{ClickId, Decision, TenantId};
use balcao::store::OutboxStore;
use balcao::whatsapp::OutboundMessage;
use serde_json::{Value, json};

pub(crate) const CUSTOMER: &str = "5511999990001";
/// The customer's CPF, as a merchant types it.
pub(crate) const PAYER_DOCUMENT: &str = "529.982.247-25";

pub(crate) fn button(from: &str, wamid: &str, id: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": now(), "type": "interactive",
            "context": { "from": "15550783881", "id": "wamid.offer" },
            "interactive": { "type": "button_reply", "button_reply": { "id": id, "title": "Confirmar" } } })
}

/// A row picked from a list message, as Meta delivers it.
pub(crate) fn pick(from: &str, wamid: &str, id: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": now(), "type": "interactive",
            "context": { "from": "15550783881", "id": "wamid.list" },
            "interactive": { "type": "list_reply", "list_reply": { "id": id, "title": "x" } } })
}

/// The staff menu's choices, in order.
pub(crate) const STAFF_MENU: [&str; 5] = ["m:charge", "m:refund", "m:withdraw", "m:today", "m:agenda"];

pub(crate) async fn post(app: &TestApp, from: &str, message: Value) {
    let status = app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, from, vec![message]))).await.status();
    assert_eq!(status, 200);
}

/// Everything queued for `wa_id`, oldest first.
pub(crate) async fn inbox(db: &TestDb, tenant: TenantId, wa_id: &str) -> Vec<OutboundMessage> {
    db.store.outbound_for_wa_id(tenant, wa_id, 0).await.unwrap().into_iter().map(|r| r.message.0).collect()
}

/// The merchant walks the guided "Nova cobrança" form; returns the proposal's Confirmar id.
pub(crate) async fn propose_charge(db: &TestDb, app: &TestApp, s: &Scenario, tag: &str) -> String {
    post(app, STAFF, text(&format!("wamid.{tag}.1"), STAFF, "oi")).await;
    app.drain_turns().await;
    let menu = inbox(db, s.tenant.id, STAFF).await;
    assert_eq!(last_rows(&menu), STAFF_MENU);
    post(app, STAFF, pick(STAFF, &format!("wamid.{tag}.2"), "m:charge")).await;
    app.drain_turns().await;
    for (n, answer) in ["50,00", "11 99999-0001", "Corte e barba"].iter().enumerate() {
        post(app, STAFF, text(&format!("wamid.{tag}.{}", n + 3), STAFF, answer)).await;
        app.drain_turns().await;
        // A gateway that needs the payer's document asks for it after the number.
        let asked = inbox(db, s.tenant.id, STAFF).await.last().is_some_and(|m| m.body().contains("CPF ou CNPJ"));
        if asked {
            post(app, STAFF, text(&format!("wamid.{tag}.doc"), STAFF, PAYER_DOCUMENT)).await;
            app.drain_turns().await;
        }
    }
    let offer = inbox(db, s.tenant.id, STAFF).await;
    assert!(offer.last().unwrap().body().contains("R$ 50,00"), "{:?}", offer.last());
    let ids = last_buttons(&offer);
    assert!(ClickId::parse(&ids[0]).is_some_and(|c| c.decision == Decision::Confirm), "{ids:?}");
    ids[0].clone()
}

pub fn last_buttons(messages: &[OutboundMessage]) -> Vec<String> {
    match messages.last() {
        Some(OutboundMessage::Buttons { buttons, .. }) => buttons.iter().map(|b| b.id.clone()).collect(),
        other => panic!("expected buttons, got {other:?}"),
    }
}

/// The staff walks "Devolver um Pix" to charge `id` and answers the amount with `amount` (a
/// typed value) or the "everything" button; returns the last message the staff got.
pub(crate) async fn ask_refund(
    db: &TestDb,
    app: &TestApp,
    s: &Scenario,
    id: i64,
    amount: Option<&str>,
    tag: &str,
) -> OutboundMessage {
    post(app, STAFF, pick(STAFF, &format!("wamid.{tag}.1"), "m:refund")).await;
    app.drain_turns().await;
    let list = inbox(db, s.tenant.id, STAFF).await;
    assert!(last_rows(&list).contains(&format!("m:refund:{id}")), "{:?}", list.last());
    post(app, STAFF, pick(STAFF, &format!("wamid.{tag}.2"), &format!("m:refund:{id}"))).await;
    app.drain_turns().await;
    let asked = inbox(db, s.tenant.id, STAFF).await;
    assert_eq!(last_buttons(&asked), [format!("m:refund_all:{id}")]);
    match amount {
        Some(typed) => post(app, STAFF, text(&format!("wamid.{tag}.3"), STAFF, typed)).await,
        None => post(app, STAFF, button(STAFF, &format!("wamid.{tag}.3"), &format!("m:refund_all:{id}"))).await,
    }
    app.drain_turns().await;
    inbox(db, s.tenant.id, STAFF).await.pop().expect("an answer")
}

/// How many of `messages` contain `needle`.
pub(crate) fn told(messages: &[OutboundMessage], needle: &str) -> usize {
    messages.iter().filter(|m| m.body().contains(needle)).count()
}

/// The row ids of the last message, a list.
pub fn last_rows(messages: &[OutboundMessage]) -> Vec<String> {
    match messages.last() {
        Some(OutboundMessage::List { sections, .. }) => {
            sections.iter().flat_map(|s| s.rows.iter().map(|r| r.id.clone())).collect()
        }
        other => panic!("expected a list, got {other:?}"),
    }
}
