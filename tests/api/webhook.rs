//! The webhook edge, over real HTTP: handshake, signatures, limits, batches, every message
//! type, duplicates, statuses, and random bodies.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use balcao::jobs::{Turn, TurnHandler};
use balcao::store::{InboundStore, JobStore};
use serde_json::json;

use crate::contract;
use crate::support::common::{APP_SECRET, TestApp, TestDb, VERIFY_TOKEN, test_config};
use crate::support::fake_graph::FakeGraph;
use crate::support::payloads::{bytes, envelope, fixture, text, text_payload};

/// Records the turns it is given and answers nothing.
#[derive(Default, Clone)]
pub struct Recorder(pub Arc<Mutex<Vec<Turn>>>);

#[async_trait]
impl TurnHandler for Recorder {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        self.0.lock().expect("lock").push(turn.clone());
        Ok(())
    }
}

impl Recorder {
    pub fn turns(&self) -> Vec<Turn> {
        self.0.lock().expect("lock").clone()
    }
}

async fn recording_app(db: &TestDb) -> (TestApp, Recorder) {
    let graph = FakeGraph::start().await;
    let recorder = Recorder::default();
    let r = recorder.clone();
    let app = TestApp::spawn_with(db, test_config(&graph.url, &[]), move |_| Arc::new(r)).await;
    (app, recorder)
}

#[tokio::test]
async fn subscription_handshake_echoes_the_raw_challenge() {
    let db = TestDb::sqlite().await;
    let graph = FakeGraph::start().await;
    let app = TestApp::spawn(&db, test_config(&graph.url, &[])).await;
    let get = |query: String| {
        let app = &app;
        async move { app.get(&format!("/webhooks/whatsapp?{query}")).await }
    };
    // Leading zeros prove the challenge is echoed as a string, never parsed as a number.
    let ok =
        get(format!("hub.mode=subscribe&hub.challenge=0012345678901234567890&hub.verify_token={VERIFY_TOKEN}")).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "0012345678901234567890");

    let wrong_token = get("hub.mode=subscribe&hub.challenge=1&hub.verify_token=nope".into()).await;
    assert_eq!(wrong_token.status(), 403);
    let wrong_mode = get(format!("hub.mode=unsubscribe&hub.challenge=1&hub.verify_token={VERIFY_TOKEN}")).await;
    assert_eq!(wrong_mode.status(), 403);
    let no_challenge = get(format!("hub.mode=subscribe&hub.verify_token={VERIFY_TOKEN}")).await;
    assert_eq!(no_challenge.status(), 403);
    assert_eq!(get(String::new()).await.status(), 403);
    db.cleanup().await;
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let db = TestDb::sqlite().await;
    let graph = FakeGraph::start().await;
    let app = TestApp::spawn(&db, test_config(&graph.url, &[])).await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    assert_eq!(app.get("/readyz").await.text().await.unwrap(), "ready");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    for name in [
        "balcao_inbound_received_total",
        "balcao_inbound_duplicate_total",
        "balcao_webhook_signature_rejected_total",
        "balcao_inbound_unknown_tenant_total",
        "balcao_webhook_parse_errors_total",
        "balcao_jobs_claimed_total",
        "balcao_jobs_retried_total",
        "balcao_jobs_dead_total",
        "balcao_outbox_sent_total",
        "balcao_outbox_failed_total",
    ] {
        assert!(metrics.contains(name), "{name} missing from\n{metrics}");
    }
    db.store.close().await;
    assert_eq!(app.get("/readyz").await.status(), 503);
}

contract!(signature_is_required_and_checked_on_raw_bytes, |db| async move {
    let tenant = db.tenant().await;
    let (app, _) = recording_app(db).await;
    let body = bytes(&fixture("text"));

    let unsigned = app.http.post(format!("{}/webhooks/whatsapp", app.url)).body(body.clone()).send().await.unwrap();
    assert_eq!(unsigned.status(), 401);
    let forged = app
        .http
        .post(format!("{}/webhooks/whatsapp", app.url))
        .header("x-hub-signature-256", balcao::whatsapp::signature::sign(b"another-secret", &body))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    // Same JSON, different bytes: the signature covers the raw body, not its meaning.
    let mut reformatted = body.clone();
    reformatted.push(b' ');
    let tampered = app
        .http
        .post(format!("{}/webhooks/whatsapp", app.url))
        .header("x-hub-signature-256", balcao::whatsapp::signature::sign(APP_SECRET.as_bytes(), &body))
        .body(reformatted)
        .send()
        .await
        .unwrap();
    assert_eq!(tampered.status(), 401);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 0);
    assert_eq!(app.metrics.webhook_signature_rejected.get(), 3);

    assert_eq!(app.post_webhook(&body).await.status(), 200);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 1);
});

contract!(oversize_and_malformed_bodies_are_refused, |db| async move {
    let tenant = db.tenant().await;
    let (app, _) = recording_app(db).await;
    let mut huge = bytes(&text_payload("wamid.big", "16505551234", "x"));
    huge.resize(3 * 1024 * 1024 + 1, b' ');
    assert_eq!(app.post_webhook(&huge).await.status(), 413);
    assert_eq!(app.post_webhook(b"{not json").await.status(), 400);
    // Exactly at the limit is accepted.
    let mut at_limit = bytes(&text_payload("wamid.limit", "16505551234", "x"));
    at_limit.resize(3 * 1024 * 1024, b' ');
    assert_eq!(app.post_webhook(&at_limit).await.status(), 200);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 1);
});

contract!(every_documented_message_type_is_stored, |db| async move {
    let tenant = db.tenant().await;
    let (app, recorder) = recording_app(db).await;
    let mut list = fixture("list_reply");
    // Meta's list and quick-reply examples share one wamid; make them two messages.
    list["entry"][0]["changes"][0]["value"]["messages"][0]["id"] = json!("wamid.list-example");
    for body in [fixture("text"), fixture("button_reply"), list, fixture("template_quick_reply")] {
        assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
    }
    let others = vec![
        json!({"from": "16505551234", "id": "wamid.img", "timestamp": "1", "type": "image",
               "image": {"mime_type": "image/jpeg", "sha256": "x", "id": "123"}}),
        json!({"from": "16505551234", "id": "wamid.audio", "timestamp": "1", "type": "audio", "audio": {"id": "9"}}),
        json!({"from": "16505551234", "id": "wamid.loc", "timestamp": "1", "type": "location",
               "location": {"latitude": -23.5, "longitude": -46.6}}),
        json!({"from": "16505551234", "id": "wamid.unsup", "timestamp": "1", "type": "unsupported",
               "unsupported": {"type": "edit"}, "errors": [{"code": 131051, "title": "Message type unknown"}]}),
        json!({"from": "16505551234", "id": "wamid.react", "timestamp": "1", "type": "reaction",
               "reaction": {"message_id": "wamid.x", "emoji": "👍"}}),
    ];
    assert_eq!(
        app.post_webhook(&bytes(&envelope(crate::support::common::PHONE_NUMBER_ID, "16505551234", others)))
            .await
            .status(),
        200
    );
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 9);

    app.drain_turns().await;
    let turns = recorder.turns();
    assert_eq!(turns.len(), 1, "all nine messages of one contact form one turn");
    let turn = &turns[0];
    // The reaction is stored (nine above) but never answered: the handler does not see it.
    let kinds: Vec<_> = turn.messages.iter().map(|m| m.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["text", "button_reply", "list_reply", "quick_reply", "image", "audio", "location", "unsupported"]
    );
    assert_eq!(turn.messages[7].error_code, Some(131051));
    let m = &turn.messages;
    assert_eq!(m[0].body.as_deref(), Some("Does it come in another color?"));
    assert_eq!(m[1].reply_id.as_deref(), Some("cancel-button"));
    assert_eq!(
        m[1].context_id.as_deref(),
        Some(app.privacy_key.message_id("wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3MEM2RUJFNkI0RENGQTVDRjUA").as_str())
    );
    assert_eq!(m[2].reply_id.as_deref(), Some("priority_express"));
    assert_eq!(m[3].reply_id.as_deref(), Some("Unsubscribe"));
    assert_eq!(turn.contact.profile_name.as_deref(), Some("Sheena Nelson"));
    assert_eq!(turn.contact.wa_id.as_ref().map(|p| p.as_str()), Some("+16505551234"));
    assert_eq!(turn.trigger_message_id.as_deref(), Some(app.privacy_key.message_id("wamid.react").as_str()));
});

contract!(a_bad_element_does_not_drop_its_siblings, |db| async move {
    let tenant = db.tenant().await;
    let (app, recorder) = recording_app(db).await;
    let body = json!({
        "object": "whatsapp_business_account",
        "entry": [
            "not an object",
            { "id": "1", "changes": [
                { "field": "messages", "value": {
                    "metadata": { "phone_number_id": crate::support::common::PHONE_NUMBER_ID },
                    "contacts": [{ "wa_id": "16505551234", "profile": { "name": "Ana" } }, 42],
                    "messages": [
                        text("wamid.first", "16505551234", "primeira"),
                        { "from": "16505551234", "timestamp": "1", "type": "text", "text": { "body": "no id" } },
                        { "from": "16505551234", "id": "wamid.badtext", "type": "text" },
                        { "from": "not a phone", "id": "wamid.badfrom", "type": "text", "text": { "body": "x" } },
                        text("wamid.second", "16505551234", "segunda"),
                    ],
                    "statuses": [{ "status": "delivered" }]
                }},
                { "field": "messages", "value": { "metadata": {} } },
                { "field": "account_update", "value": { "whatever": true } }
            ]},
            { "id": "2", "changes": [{ "field": "messages", "value": {
                "metadata": { "phone_number_id": "999999" },
                "messages": [text("wamid.elsewhere", "16505551234", "oi")]
            }}]}
        ]
    });
    assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 2);
    assert_eq!(app.metrics.webhook_parse_errors.get(), 6, "entry, three messages, one status, one change");
    assert_eq!(app.metrics.inbound_unknown_tenant.get(), 1);
    assert_eq!(app.metrics.inbound_received.get(), 2);
    app.drain_turns().await;
    let bodies: Vec<_> = recorder.turns()[0].messages.iter().map(|m| m.body.clone().unwrap_or_default()).collect();
    assert_eq!(bodies, ["primeira", "segunda"]);
});

contract!(unknown_number_is_acknowledged_and_counted, |db| async move {
    let tenant = db.tenant().await;
    let (app, _) = recording_app(db).await;
    let body = envelope("555000111", "16505551234", vec![text("wamid.x", "16505551234", "oi")]);
    assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
    assert_eq!(app.metrics.inbound_unknown_tenant.get(), 1);
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 0);
});

contract!(a_number_applied_after_an_unknown_webhook_is_processed, |db| async move {
    let (app, _) = recording_app(db).await;
    let first = envelope("555000222", "16505551234", vec![text("wamid.before", "16505551234", "oi")]);
    assert_eq!(app.post_webhook(&bytes(&first)).await.status(), 200);
    assert_eq!(app.metrics.inbound_unknown_tenant.get(), 1);

    // `balcao tenant apply` for that number, a moment later, while the server runs.
    let tenant = db.tenant_with("555000222", "recem-chegada", None).await;
    let second = envelope("555000222", "16505551234", vec![text("wamid.after", "16505551234", "oi de novo")]);
    assert_eq!(app.post_webhook(&bytes(&second)).await.status(), 200);
    assert_eq!(app.metrics.inbound_unknown_tenant.get(), 1, "the earlier miss was not remembered");
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 1);
    assert_eq!(db.store.count_jobs(tenant.id).await.unwrap(), 1);
});

contract!(a_duplicate_delivery_changes_nothing, |db| async move {
    let tenant = db.tenant().await;
    let (app, recorder) = recording_app(db).await;
    let body = bytes(&fixture("text"));
    for _ in 0..3 {
        assert_eq!(app.post_webhook(&body).await.status(), 200);
    }
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 1);
    assert_eq!(db.store.count_jobs(tenant.id).await.unwrap(), 1);
    assert_eq!(app.metrics.inbound_duplicate.get(), 2);
    app.drain_turns().await;
    // Redelivered after the turn ran: still nothing new.
    assert_eq!(app.post_webhook(&body).await.status(), 200);
    assert_eq!(app.drain_turns().await.len(), 0);
    assert_eq!(recorder.turns().len(), 1);
    assert_eq!(db.store.count_jobs(tenant.id).await.unwrap(), 1);
});

contract!(business_scoped_user_without_phone_is_keyed_by_user_id, |db| async move {
    let tenant = db.tenant().await;
    let (app, recorder) = recording_app(db).await;
    let body = json!({
        "object": "whatsapp_business_account",
        "entry": [{ "id": "1", "changes": [{ "field": "messages", "value": {
            "metadata": { "phone_number_id": crate::support::common::PHONE_NUMBER_ID },
            "contacts": [{ "user_id": "BR.1502576394655843", "profile": { "name": "Bia", "username": "bia" } }],
            "messages": [{ "from_user_id": "BR.1502576394655843", "id": "wamid.bsuid", "timestamp": "1",
                           "type": "text", "text": { "body": "oi" } }]
        }}]}]
    });
    assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
    app.drain_turns().await;
    let turn = &recorder.turns()[0];
    assert_eq!(turn.contact.wa_id, None);
    assert_eq!(turn.contact.user_id.as_deref(), Some("BR.1502576394655843"));
    assert_eq!(turn.recipient().user_id.as_deref(), Some("BR.1502576394655843"));
    assert_eq!(db.store.count_inbound(tenant.id).await.unwrap(), 1);
});

/// One message from `phone` and/or `user_id`, with the matching `contacts[]` entry.
fn identity_payload(wamid: &str, phone: Option<&str>, user_id: Option<&str>) -> serde_json::Value {
    let mut contact = json!({ "profile": { "name": "Bia" } });
    let mut message = json!({ "id": wamid, "timestamp": "1", "type": "text", "text": { "body": "oi" } });
    if let Some(phone) = phone {
        contact["wa_id"] = json!(phone);
        message["from"] = json!(phone);
    }
    if let Some(user_id) = user_id {
        contact["user_id"] = json!(user_id);
        message["from_user_id"] = json!(user_id);
    }
    json!({
        "object": "whatsapp_business_account",
        "entry": [{ "id": "1", "changes": [{ "field": "messages", "value": {
            "metadata": { "phone_number_id": crate::support::common::PHONE_NUMBER_ID },
            "contacts": [contact],
            "messages": [message]
        }}]}]
    })
}

contract!(a_customer_who_switches_to_a_user_id_stays_one_contact, |db| async move {
    use crate::support::scenario::{Customer, Scenario};
    const PHONE: &str = "5511999990003";
    const USER: &str = "BR.1502576394655843";
    let s = Scenario::new(db).await;
    let (app, recorder) = recording_app(db).await;
    let mut turns = Vec::new();
    for (wamid, phone, user) in
        [("wamid.phone", Some(PHONE), None), ("wamid.both", Some(PHONE), Some(USER)), ("wamid.user", None, Some(USER))]
    {
        assert_eq!(app.post_webhook(&bytes(&identity_payload(wamid, phone, user))).await.status(), 200);
        assert_eq!(app.drain_turns().await.len(), 1, "{wamid}");
        turns.push(recorder.turns().last().cloned().expect("a turn"));
        if turns.len() == 1 {
            // Booked while only the phone was known.
            let c = Customer { contact: turns[0].contact.contact_id, conversation: turns[0].conversation };
            let booking =
                json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": "2026-03-11T14:00:00-03:00" });
            assert!(matches!(s.call(&c, "create_booking", booking).await, balcao::ledger::Outcome::Executed(_)));
        }
    }
    for turn in &turns[1..] {
        assert_eq!(turn.contact.contact_id, turns[0].contact.contact_id, "{:?}", turn.trigger_message_id);
        assert_eq!(turn.conversation, turns[0].conversation, "{:?}", turn.trigger_message_id);
    }
    let last = &turns[2].contact;
    // Replies still go to the phone the customer wrote from, and the user id is known.
    assert_eq!(last.wa_id.as_ref().map(|p| p.as_str()), Some("+5511999990003"));
    assert_eq!(last.user_id.as_deref(), Some(USER));

    let c = Customer { contact: last.contact_id, conversation: turns[2].conversation };
    let mine = match s.call(&c, "list_my_bookings", json!({})).await {
        balcao::ledger::Outcome::Executed(v) => v,
        other => panic!("list_my_bookings: {other:?}"),
    };
    let id = mine["bookings"][0]["booking_id"].clone();
    assert!(id.is_i64(), "{mine}");
    assert_eq!(s.cancel(&c, &id).await["status"], "executed");
});

mod random_bodies {
    use proptest::prelude::*;

    use super::*;

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z0-9.+]{0,12}".prop_map(serde_json::Value::from),
            Just(json!(crate::support::common::PHONE_NUMBER_ID)),
        ];
        leaf.prop_recursive(5, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("entry".to_owned()),
                        Just("changes".to_owned()),
                        Just("value".to_owned()),
                        Just("messages".to_owned()),
                        Just("statuses".to_owned()),
                        Just("metadata".to_owned()),
                        Just("phone_number_id".to_owned()),
                        Just("id".to_owned()),
                        Just("from".to_owned()),
                        Just("type".to_owned()),
                        Just("text".to_owned()),
                        Just("interactive".to_owned()),
                        "[a-z_]{1,8}",
                    ],
                    inner,
                    0..5
                )
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The server's rule for an authentic body of acceptable size: JSON is 200 whatever its
    /// shape (bad elements are skipped and counted, never retried), anything else is 400.
    fn expected_status(body: &[u8]) -> u16 {
        if serde_json::from_slice::<serde_json::Value>(body).is_ok() { 200 } else { 400 }
    }

    #[test]
    fn expected_status_follows_json_validity() {
        assert_eq!(expected_status(b"{not json"), 400);
        assert_eq!(expected_status(b""), 400);
        assert_eq!(expected_status(&[0xff, 0xfe]), 400);
        assert_eq!(expected_status(b"42"), 200);
        assert_eq!(expected_status(b" {\"entry\": 1} "), 200);
    }

    /// Random signed bodies (raw bytes, JSON shaped like Meta's, and that JSON cut short)
    /// never panic the handler, and each gets exactly the answer its validity calls for.
    #[test]
    fn each_random_body_gets_its_expected_status() {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let (db, app) = runtime.block_on(async {
            let db = TestDb::sqlite().await;
            db.tenant().await;
            let graph = FakeGraph::start().await;
            let app = TestApp::spawn(&db, test_config(&graph.url, &[])).await;
            (db, app)
        });
        let config = ProptestConfig { cases: 96, ..ProptestConfig::default() };
        proptest!(config, |(raw in prop::collection::vec(any::<u8>(), 0..256), shaped in json_value(), cut in any::<prop::sample::Index>())| {
            let valid = serde_json::to_vec(&json!({ "object": "whatsapp_business_account", "entry": shaped })).unwrap();
            // Always at least one byte short, so always invalid.
            let truncated = valid[..cut.index(valid.len())].to_vec();
            let cases = [(raw.clone(), expected_status(&raw)), (valid, 200), (truncated, 400)];
            for (body, expected) in cases {
                let status = runtime.block_on(app.post_webhook(&body)).status();
                prop_assert_eq!(status.as_u16(), expected, "body {:?}", String::from_utf8_lossy(&body));
            }
        });
        runtime.block_on(db.cleanup());
    }
}
