//! The outbound kinds for Pix charges and reminders, from an outbox row to what reached the
//! loopback Graph API: templates with quick replies, a QR code uploaded then sent as an image,
//! an order with its plain-text fallback, and an order status. Both databases.

use balcao::domain::{Cents, ConversationId, PhoneE164};
use balcao::outbox::SendOutcome;
use balcao::store::{NewOutbound, OutboxKey, OutboxStore};
use balcao::tenant::Tenant;
use balcao::whatsapp::{OutboundMessage, Recipient};
use chrono::{TimeDelta, Utc};
use serde_json::json;

use crate::contract;
use crate::support::common::{ACCESS_TOKEN, PHONE_NUMBER_ID, TestApp, TestDb, test_config};
use crate::support::fake_graph::{FakeGraph, Reply};
use crate::support::queue::{record, timing};

const CUSTOMER: &str = "+5511999990001";
const BR_CODE: &str = "00020101021226820014br.gov.bcb.pix2560pix.example.com/qr/v2/cobv/9d36b84f5204000053039865802BR5913BARBEARIA ZE6009SAO PAULO62070503***63041D3D";
const FALLBACK: &str = "Cobrança de R$ 50,00 — Corte masculino.\nPix copia e cola:\n00020101021226820014br.gov.bcb.pix";

/// An app on the fake Graph API and a conversation with one customer.
struct Setup {
    app: TestApp,
    graph: FakeGraph,
    tenant: Tenant,
    conversation: ConversationId,
}

impl Setup {
    async fn new(db: &TestDb) -> Self {
        let tenant = db.tenant().await;
        let graph = FakeGraph::start().await;
        let app = TestApp::spawn(db, test_config(&graph.url, &[])).await;
        let (conversation, _) = record(&db.store, &tenant, "wamid.kinds", CUSTOMER, &timing(0, 0, 5), Utc::now()).await;
        Self { app, graph, tenant, conversation }
    }

    /// Puts `message` in the outbox under `key`, as a feature outside a turn would.
    async fn queue(&self, db: &TestDb, key: &str, message: OutboundMessage) {
        let new = NewOutbound {
            tenant: self.tenant.id,
            conversation: self.conversation,
            key: OutboxKey::parse(key).unwrap(),
            recipient: Recipient { wa_id: Some(PhoneE164::parse(CUSTOMER).unwrap()), user_id: None },
            message,
            local: false,
            written_by: None,
            unless_handed_off: false,
        };
        assert!(db.store.enqueue_outbound(&new, Utc::now()).await.unwrap().is_some());
    }

    async fn row(&self, db: &TestDb) -> balcao::store::OutboundRecord {
        let rows = db.store.list_outbound(self.tenant.id).await.unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        rows.into_iter().next().unwrap()
    }
}

fn order() -> OutboundMessage {
    OutboundMessage::OrderDetails {
        reference_id: "cob7x2k9q4m1n8p3r5t6v0w2y4".into(),
        body: "Sua cobrança de Corte masculino".into(),
        footer: None,
        amount: Cents(5000),
        description: "Corte masculino".into(),
        copia_e_cola: BR_CODE.into(),
        merchant_name: "Barbearia do Zé".into(),
        pix_key: "12345678000199".into(),
        key_type: "CNPJ".into(),
        fallback: FALLBACK.into(),
    }
}

contract!(a_template_goes_out_with_its_parameters_and_quick_reply_payloads, |db| async move {
    let s = Setup::new(db).await;
    let reminder = OutboundMessage::template(
        "lembrete_horario",
        "pt_BR",
        vec!["Ana".into(), "amanhã às 14:00".into()],
        vec!["act:7:confirm".into(), "act:7:cancel".into()],
    )
    .unwrap();
    s.queue(db, "reminder:7", reminder).await;
    let outcomes = s.app.drain_outbox().await;
    assert!(matches!(outcomes.as_slice(), [SendOutcome::Sent { .. }]), "{outcomes:?}");
    let sends = s.graph.sends();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].phone_number_id, PHONE_NUMBER_ID);
    assert_eq!(
        sends[0].body,
        json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": CUSTOMER,
            "biz_opaque_callback_data": "reminder:7",
            "type": "template",
            "template": {
                "name": "lembrete_horario",
                "language": { "code": "pt_BR" },
                "components": [
                    { "type": "body", "parameters": [
                        { "type": "text", "text": "Ana" },
                        { "type": "text", "text": "amanhã às 14:00" },
                    ]},
                    { "type": "button", "sub_type": "quick_reply", "index": "0",
                      "parameters": [{ "type": "payload", "payload": "act:7:confirm" }] },
                    { "type": "button", "sub_type": "quick_reply", "index": "1",
                      "parameters": [{ "type": "payload", "payload": "act:7:cancel" }] },
                ],
            },
        })
    );
    assert_eq!(s.row(db).await.status, "sent");
    assert!(s.graph.uploads().is_empty());
});

contract!(a_qr_code_is_uploaded_then_sent_as_an_image_of_the_upload, |db| async move {
    let s = Setup::new(db).await;
    s.queue(db, "charge:9:qr", OutboundMessage::qr_image(BR_CODE, Some("Pague com Pix".into())).unwrap()).await;
    let outcome = s.app.sender.send_next().await.unwrap();
    assert!(
        matches!(&outcome, SendOutcome::Sent { wamid } if *wamid == s.app.privacy_key.message_id("wamid.FAKE000001")),
        "{outcome:?}"
    );

    let uploads = s.graph.uploads();
    assert_eq!(uploads.len(), 1);
    let upload = &uploads[0];
    assert_eq!(upload.phone_number_id, PHONE_NUMBER_ID);
    assert_eq!(upload.authorization.as_deref(), Some(format!("Bearer {ACCESS_TOKEN}").as_str()));
    assert_eq!(upload.messaging_product.as_deref(), Some("whatsapp"));
    assert_eq!(upload.media_type.as_deref(), Some("image/png"));
    assert_eq!(upload.file_content_type.as_deref(), Some("image/png"));
    assert!(upload.file_name.as_deref().is_some_and(|n| n.ends_with(".png")), "{:?}", upload.file_name);
    assert!(upload.is_png());
    assert_eq!(upload.file.len(), balcao::pix::qr::png(BR_CODE).unwrap().len());

    let sends = s.graph.sends();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].body["type"], "image");
    assert_eq!(sends[0].body["image"], json!({ "id": "media.FAKE000001", "caption": "Pague com Pix" }));
    assert_eq!(sends[0].body["biz_opaque_callback_data"], "charge:9:qr");
    assert_eq!(sends[0].body["to"], CUSTOMER);
    let row = s.row(db).await;
    assert_eq!(
        (row.status.as_str(), row.provider_message_id.as_deref()),
        ("sent", Some(s.app.privacy_key.message_id("wamid.FAKE000001").as_str()))
    );
});

contract!(a_failed_upload_is_retried_then_sent, |db| async move {
    let s = Setup::new(db).await;
    s.queue(db, "charge:9:qr", OutboundMessage::qr_image(BR_CODE, None).unwrap()).await;
    // A server error, a rate limit, then an upload that never answers: none of them sent
    // anything to the customer.
    s.graph.script_uploads([Reply::Status(500), Reply::Error(429, 130429), Reply::Hang]);
    let now = Utc::now();
    assert_eq!(s.app.sender.send_next_at(now).await.unwrap(), SendOutcome::WillRetry);
    let row = s.row(db).await;
    assert_eq!(row.status, "pending");
    let reason = row.last_error.unwrap_or_default();
    assert!(reason.contains("media upload") && reason.contains("500"), "{reason}");
    assert!(s.graph.sends().is_empty());
    assert_eq!(s.app.sender.send_next_at(now).await.unwrap(), SendOutcome::Empty, "backing off");

    let later = now + TimeDelta::minutes(10);
    assert_eq!(s.app.sender.send_next_at(later).await.unwrap(), SendOutcome::WillRetry);
    assert!(s.row(db).await.last_error.unwrap_or_default().contains("130429"));
    let later = later + TimeDelta::minutes(10);
    assert_eq!(s.app.sender.send_next_at(later).await.unwrap(), SendOutcome::WillRetry);
    let row = s.row(db).await;
    assert_eq!(row.status, "pending", "a lost upload is a plain retry, not an unknown send");
    assert!(row.last_error.unwrap_or_default().contains("media upload"));

    let sent = s.app.sender.send_next_at(later + TimeDelta::minutes(10)).await.unwrap();
    assert!(matches!(sent, SendOutcome::Sent { .. }), "{sent:?}");
    assert_eq!(s.graph.uploads().len(), 4);
    let sends = s.graph.sends();
    assert_eq!(sends.len(), 1, "one image message for four uploads");
    assert_eq!(sends[0].body["image"], json!({ "id": "media.FAKE000004" }));
    let row = s.row(db).await;
    assert_eq!((row.status.as_str(), row.attempts), ("sent", 4));
});

contract!(a_refused_upload_or_an_unrenderable_code_fails_the_row, |db| async move {
    let s = Setup::new(db).await;
    s.graph.script_uploads([Reply::Error(400, 131053)]);
    s.queue(db, "charge:9:qr", OutboundMessage::qr_image(BR_CODE, None).unwrap()).await;
    let outcome = s.app.sender.send_next().await.unwrap();
    assert!(matches!(&outcome, SendOutcome::Failed { reason } if reason.contains("131053")), "{outcome:?}");
    assert!(s.graph.sends().is_empty());

    // More than any QR code holds: the renderer refuses it, nothing is uploaded.
    s.queue(db, "charge:10:qr", OutboundMessage::qr_image("x".repeat(8000), None).unwrap()).await;
    let outcome = s.app.sender.send_next().await.unwrap();
    assert!(
        matches!(&outcome, SendOutcome::Failed { reason } if reason.contains("failed to render the Pix QR code")),
        "{outcome:?}"
    );
    assert_eq!(s.graph.uploads().len(), 1, "only the first row's upload");
    assert!(s.graph.sends().is_empty());
    let rows = db.store.list_outbound(s.tenant.id).await.unwrap();
    assert!(rows.iter().all(|r| r.status == "failed"), "{rows:?}");
    assert_eq!(s.app.sender.send_next_at(Utc::now() + TimeDelta::days(1)).await.unwrap(), SendOutcome::Empty);
});

contract!(a_refused_order_is_followed_by_its_plain_text_fallback, |db| async move {
    let s = Setup::new(db).await;
    // A number not enabled for payments: Meta refuses every order_details.
    s.graph.answer_interactive("order_details", Reply::Error(400, 131009));
    s.queue(db, "charge:9:order", order()).await;
    let outcome = s.app.sender.send_next().await.unwrap();
    assert!(
        matches!(&outcome, SendOutcome::Sent { wamid } if *wamid == s.app.privacy_key.message_id("wamid.FAKE000002")),
        "{outcome:?}"
    );

    let sends = s.graph.sends();
    assert_eq!(sends.len(), 2);
    let interactive = &sends[0].body["interactive"];
    assert_eq!(interactive["type"], "order_details");
    assert_eq!(interactive["action"]["name"], "review_and_pay");
    let parameters = &interactive["action"]["parameters"];
    assert_eq!(parameters["reference_id"], "cob7x2k9q4m1n8p3r5t6v0w2y4");
    assert_eq!(parameters["currency"], "BRL");
    assert_eq!(parameters["total_amount"], json!({ "value": 5000, "offset": 100 }));
    assert_eq!(
        parameters["payment_settings"],
        json!([{ "type": "pix_dynamic_code", "pix_dynamic_code": {
            "code": BR_CODE, "merchant_name": "Barbearia do Zé", "key": "12345678000199", "key_type": "CNPJ" } }])
    );
    assert_eq!(parameters["order"]["items"][0]["amount"], json!({ "value": 5000, "offset": 100 }));
    // The fallback: plain text under the same key.
    assert_eq!(sends[1].body["type"], "text");
    assert_eq!(sends[1].body["text"]["body"], FALLBACK);
    assert_eq!(sends[1].body["biz_opaque_callback_data"], "charge:9:order");
    assert_eq!(sends[1].body["to"], CUSTOMER);

    let row = s.row(db).await;
    assert_eq!(
        (row.status.as_str(), row.provider_message_id.as_deref()),
        ("sent", Some(s.app.privacy_key.message_id("wamid.FAKE000002").as_str()))
    );
    let note = row.last_error.unwrap_or_default();
    assert!(note.contains("order_details refused") && note.contains("131009"), "{note}");
    assert!(note.contains("plain-text fallback"), "{note}");
    // The stored message stays the order, for the record.
    assert!(matches!(row.message.0, OutboundMessage::OrderDetails { .. }));
    assert_eq!(s.app.metrics.outbox_sent.get(), 1);
});

contract!(a_fallback_that_fails_is_retried_with_the_order_first, |db| async move {
    let s = Setup::new(db).await;
    s.graph.answer_interactive("order_details", Reply::Error(400, 131009));
    s.graph.script([Reply::Status(503)]);
    s.queue(db, "charge:9:order", order()).await;
    let now = Utc::now();
    assert_eq!(s.app.sender.send_next_at(now).await.unwrap(), SendOutcome::WillRetry);
    let row = s.row(db).await;
    assert_eq!(row.status, "pending");
    let reason = row.last_error.unwrap_or_default();
    assert!(
        reason.contains("order_details refused") && reason.contains("fallback") && reason.contains("503"),
        "{reason}"
    );

    let sent = s.app.sender.send_next_at(now + TimeDelta::minutes(10)).await.unwrap();
    assert!(matches!(sent, SendOutcome::Sent { .. }), "{sent:?}");
    let kinds: Vec<String> = s
        .graph
        .sends()
        .iter()
        .map(|send| send.body["interactive"]["type"].as_str().or(send.body["type"].as_str()).unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["order_details", "text", "order_details", "text"]);
    assert_eq!(s.row(db).await.status, "sent");
});

contract!(an_order_outside_the_window_fails_without_a_fallback, |db| async move {
    let s = Setup::new(db).await;
    s.graph.answer_interactive("order_details", Reply::Error(400, 131047));
    s.queue(db, "charge:9:order", order()).await;
    let outcome = s.app.sender.send_next().await.unwrap();
    assert!(matches!(&outcome, SendOutcome::Failed { reason } if reason.contains("24-hour")), "{outcome:?}");
    assert_eq!(s.graph.sends().len(), 1, "the text would be refused too");
    assert_eq!(s.row(db).await.status, "failed");
});

contract!(an_accepted_order_and_its_status_update_go_out_as_documented, |db| async move {
    let s = Setup::new(db).await;
    s.queue(db, "charge:9:order", order()).await;
    s.queue(
        db,
        "charge:9:paid",
        OutboundMessage::OrderStatus {
            reference_id: "cob7x2k9q4m1n8p3r5t6v0w2y4".into(),
            status: "completed".into(),
            body: "Pagamento recebido, obrigado!".into(),
        },
    )
    .await;
    let outcomes = s.app.drain_outbox().await;
    assert!(matches!(outcomes.as_slice(), [SendOutcome::Sent { .. }, SendOutcome::Sent { .. }]), "{outcomes:?}");
    let sends = s.graph.sends();
    assert_eq!(sends.len(), 2, "no fallback when the order is accepted");
    assert_eq!(sends[0].body["interactive"]["type"], "order_details");
    assert_eq!(
        sends[1].body["interactive"],
        json!({
            "type": "order_status",
            "body": { "text": "Pagamento recebido, obrigado!" },
            "action": { "name": "review_order", "parameters": {
                "reference_id": "cob7x2k9q4m1n8p3r5t6v0w2y4", "order": { "status": "completed" } } },
        })
    );
    let rows = db.store.list_outbound(s.tenant.id).await.unwrap();
    assert!(rows.iter().all(|r| r.status == "sent" && r.last_error.is_none()), "{rows:?}");
});

contract!(a_location_pin_goes_out_with_its_coordinates_name_and_address, |db| async move {
    let s = Setup::new(db).await;
    let pin = OutboundMessage::location(
        -23.5558,
        -46.6622,
        Some("Barbearia do Zé".into()),
        Some("Rua Augusta, 1500 - Consolação, São Paulo - SP".into()),
    )
    .unwrap();
    s.queue(db, "turn:1:0", pin).await;
    let outcomes = s.app.drain_outbox().await;
    assert!(matches!(outcomes.as_slice(), [SendOutcome::Sent { .. }]), "{outcomes:?}");
    let sends = s.graph.sends();
    assert_eq!(sends[0].body["type"], "location");
    assert_eq!(
        sends[0].body["location"],
        json!({ "latitude": "-23.5558", "longitude": "-46.6622", "name": "Barbearia do Zé",
                "address": "Rua Augusta, 1500 - Consolação, São Paulo - SP" })
    );
    // A point off the map is refused when built, before Meta would refuse it.
    assert!(OutboundMessage::location(-91.0, 0.0, None, None).is_err());
    assert!(OutboundMessage::location(0.0, f64::NAN, None, None).is_err());
});
