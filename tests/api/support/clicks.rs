//! Buttons and clicks as Meta delivers them, and a merchant's charge proposed through the guided
//! "Nova cobrança" form (with the customer's CPF when the gateway asks for it).

use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb};
use crate::support::payloads::{bytes, envelope, text};
use crate::support::scenario::{STAFF, Scenario};
use balcao::domain::{ClickId, Decision, TenantId};
use balcao::store::OutboxStore;
use balcao::whatsapp::OutboundMessage;
use serde_json::{Value, json};

pub(crate) const CUSTOMER: &str = "5511999990001";
/// The customer's CPF, as a merchant types it.
pub(crate) const PAYER_DOCUMENT: &str = "529.982.247-25";

pub(crate) fn button(from: &str, wamid: &str, id: &str) -> Value {
    json!({ "from": from, "id": wamid, "timestamp": "1", "type": "interactive",
            "context": { "from": "15550783881", "id": "wamid.offer" },
            "interactive": { "type": "button_reply", "button_reply": { "id": id, "title": "Confirmar" } } })
}

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
    assert_eq!(last_buttons(&menu), ["m:charge", "m:today", "m:agenda"]);
    post(app, STAFF, button(STAFF, &format!("wamid.{tag}.2"), "m:charge")).await;
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
