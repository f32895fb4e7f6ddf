//! Every kind of message a customer can send, in the shapes Meta documents (its webhook
//! reference's examples; pywa's fixtures for the removed reaction and the error-only
//! interactive), against the policy of `balcao::turns::kinds`: what is stored, what is
//! answered and how often. Both databases.

use balcao::domain::TenantId;
use balcao::store::{BookingStore, ChargeStore, InboundStore};
use balcao::whatsapp::OutboundMessage;
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{CUSTOMER, inbox, propose_charge};
use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb, contacts, local_test_config};
use crate::support::payloads::{bytes, envelope, now, text};
use crate::support::scenario::{STAFF, Scenario, next_weekday_at_14h};

/// The customer's new number after a change (a Brazilian mobile, like the old one).
const NEW_NUMBER: &str = "5511977776666";
/// And after a second change.
const THIRD_NUMBER: &str = "5521966665555";

/// A `messages[]` element of `kind` from `from`, sent now, with the kind's own fields.
fn element(from: &str, wamid: &str, kind: &str, fields: Value) -> Value {
    let mut m = json!({ "from": from, "id": wamid, "timestamp": now(), "type": kind });
    if let (Some(m), Some(fields)) = (m.as_object_mut(), fields.as_object()) {
        m.extend(fields.clone());
    }
    m
}

fn reaction(wamid: &str, to: &str, emoji: Option<&str>) -> Value {
    let reaction = match emoji {
        Some(e) => json!({ "message_id": to, "emoji": e }),
        None => json!({ "message_id": to }), // Meta omits the emoji when it is removed
    };
    element(CUSTOMER, wamid, "reaction", json!({ "reaction": reaction }))
}

fn edit(wamid: &str, of: &str, body: &str) -> Value {
    element(
        CUSTOMER,
        wamid,
        "edit",
        json!({ "edit": {
        "original_message_id": of,
        "message": { "context": { "id": "M0" }, "type": "text", "text": { "body": body } } } }),
    )
}

fn revoke(wamid: &str, of: &str) -> Value {
    element(CUSTOMER, wamid, "revoke", json!({ "revoke": { "original_message_id": of } }))
}

/// Meta's media, location and contacts examples.
fn media(wamid: &str, kind: &str) -> Value {
    let fields = match kind {
        "image" => json!({ "image": { "caption": "esse corte", "mime_type": "image/jpeg",
            "sha256": "SfInY0gGKTsJlUWbwxC1k+FAD0FZHvzwfpvO0zX0GUI=", "id": "1003383421387256" } }),
        "video" => json!({ "video": { "caption": "Timelapse", "mime_type": "video/mp4",
            "sha256": "vdGU5X4caz12KwFgYwpljlUNqMt1YnkH+5GkPc3mMnc=", "id": "731675419373506" } }),
        "document" => json!({ "document": { "caption": "my receipt", "filename": "receipt.pdf",
            "mime_type": "application/pdf", "sha256": "V5OPpLD/gEG6Xjg0MbmQDLFgcKsL+j5LfY4ny/pZ4MY=",
            "id": "622684793477189" } }),
        "sticker" => json!({ "sticker": { "mime_type": "image/webp",
            "sha256": "wvqXMe6n7n1W0zphvLPoLj+s/NtKqmr3zZ7YzTP7xFI=", "id": "1908647269898587", "animated": true } }),
        "location" => json!({ "location": { "address": "101 Forest Ave, Palo Alto, CA 94301",
            "latitude": 37.44221496582, "longitude": -122.16165924072, "name": "Philz Coffee",
            "url": "https://philzcoffee.com/" } }),
        "contacts" => json!({ "contacts": [{ "name": { "first_name": "Barbara", "last_name": "Johnson",
            "formatted_name": "Barbara J. Johnson" }, "org": { "company": "Social Tsunami" },
            "phones": [{ "phone": "+1 (415) 555-0829", "wa_id": "14125550829", "type": "MOBILE" }] }] }),
        other => panic!("no example for {other}"),
    };
    element(CUSTOMER, wamid, kind, fields)
}

/// A stored message: (kind, body, error code), oldest first.
async fn stored(db: &TestDb, tenant: TenantId) -> Vec<(String, Option<String>, Option<i64>)> {
    crate::raw_pool!(db, pool => sqlx::query_as::<_, (String, Option<String>, Option<i64>)>(
        "SELECT kind, body, error_code FROM inbound_messages WHERE tenant_id = $1 ORDER BY id")
        .bind(tenant.0)
        .fetch_all(&pool)
        .await
        .unwrap())
}

/// Posts `messages` in one webhook body from `from` and runs the turns; returns what `from`
/// was sent since `before` messages.
async fn turn(db: &TestDb, app: &TestApp, s: &Scenario, from: &str, messages: Vec<Value>) -> Vec<OutboundMessage> {
    let before = inbox(db, s.tenant.id, from).await.len();
    let status = app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, from, messages))).await.status();
    assert_eq!(status, 200);
    app.drain_turns().await;
    inbox(db, s.tenant.id, from).await.split_off(before)
}

async fn app(db: &TestDb) -> (Scenario, TestApp) {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    (s, app)
}

contract!(reactions_deletions_and_notices_are_stored_and_never_answered, |db| async move {
    let (s, app) = app(db).await;
    assert_eq!(turn(db, &app, &s, CUSTOMER, vec![text("wamid.k1", CUSTOMER, "oi")]).await.len(), 1);
    let silent = vec![
        reaction("wamid.k2", "wamid.k1", Some("👍")),
        reaction("wamid.k3", "wamid.k1", None),
        reaction("wamid.k4", "wamid.k1", Some("")),
        revoke("wamid.k5", "wamid.k1"),
        element(
            CUSTOMER,
            "wamid.k6",
            "system",
            json!({ "identity": { "acknowledged": true,
            "created_timestamp": now(), "hash": "xyzxyz" },
            "system": { "body": "User identity changed", "type": "customer_identity_changed" } }),
        ),
    ];
    for message in silent {
        assert!(turn(db, &app, &s, CUSTOMER, vec![message]).await.is_empty(), "silent kinds get no answer");
    }
    let kinds: Vec<(String, Option<String>, Option<i64>)> = stored(db, s.tenant.id).await;
    let kinds: Vec<(&str, Option<&str>)> = kinds.iter().map(|(k, b, _)| (k.as_str(), b.as_deref())).collect();
    assert_eq!(
        kinds,
        [
            ("text", None), // deleted by the customer: its text is gone
            ("reaction", Some("👍")),
            ("reaction", None),
            ("reaction", None),
            ("revoke", None),
            ("system", None),
        ]
    );
    let raw: String = crate::raw_pool!(db, pool => sqlx::query_scalar::<_, String>(
        "SELECT CAST(raw AS TEXT) FROM inbound_messages WHERE tenant_id = $1 AND kind = 'text'")
        .bind(s.tenant.id.0).fetch_one(&pool).await.unwrap());
    assert!(!raw.contains("oi"), "the deleted message's raw element goes too: {raw}");

    // A message deleted before its turn ran is not answered at all.
    let gone = turn(
        db,
        &app,
        &s,
        CUSTOMER,
        vec![text("wamid.k7", CUSTOMER, "quero cancelar"), revoke("wamid.k8", "wamid.k7")],
    );
    assert!(gone.await.is_empty());
});

contract!(a_thumbs_up_on_a_charge_proposal_moves_no_money, |db| async move {
    let (s, app) = app(db).await;
    turn(db, &app, &s, CUSTOMER, vec![text("wamid.c1", CUSTOMER, "oi")]).await;
    let confirm = propose_charge(db, &app, &s, "m").await;
    let staff_before = inbox(db, s.tenant.id, STAFF).await.len();
    // The staff reacts to the proposal (whatever its wamid), and again, and removes it.
    let offer = "wamid.local.offer";
    let thumbs = vec![
        element(STAFF, "wamid.t1", "reaction", json!({ "reaction": { "message_id": offer, "emoji": "👍" } })),
        element(STAFF, "wamid.t2", "reaction", json!({ "reaction": { "message_id": offer, "emoji": "✅" } })),
    ];
    assert!(turn(db, &app, &s, STAFF, thumbs).await.is_empty());
    assert!(
        turn(
            db,
            &app,
            &s,
            STAFF,
            vec![element(STAFF, "wamid.t3", "reaction", json!({ "reaction": { "message_id": offer } }))]
        )
        .await
        .is_empty()
    );
    let since = chrono::Utc::now() - chrono::TimeDelta::days(1);
    assert!(db.store.charges(s.tenant.id, None, since, 10).await.unwrap().is_empty(), "no charge from a reaction");
    assert_eq!(inbox(db, s.tenant.id, STAFF).await.len(), staff_before);
    assert!(!confirm.is_empty());
});

contract!(an_edit_replaces_a_waiting_message_or_is_answered_as_edited, |db| async move {
    let (s, app) = app(db).await;
    // In the same turn: one answer, to the edited text; the stored text is the new one.
    let answers = turn(
        db,
        &app,
        &s,
        CUSTOMER,
        vec![text("wamid.e1", CUSTOMER, "meus horaros"), edit("wamid.e2", "wamid.e1", "meus horários")],
    )
    .await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(answers[0].body().contains("não tem horários"), "the edited text was read: {}", answers[0].body());
    let rows = stored(db, s.tenant.id).await;
    assert_eq!((rows[0].0.as_str(), rows[0].1.as_deref()), ("text", Some("meus horários")));

    // After its turn ran: a new message, answered once, and the answered text stays.
    let later = turn(db, &app, &s, CUSTOMER, vec![edit("wamid.e3", "wamid.e1", "meus horários de novo")]).await;
    assert_eq!(later.len(), 1);
    assert_eq!(stored(db, s.tenant.id).await[0].1.as_deref(), Some("meus horários"));

    // Plain Cloud API numbers get edits as `unsupported` (131051): kept with the code, answered as unreadable.
    let unsupported = element(
        CUSTOMER,
        "wamid.e4",
        "unsupported",
        json!({
        "errors": [{ "code": 131051, "title": "Message type unknown", "message": "Message type unknown",
                     "error_data": { "details": "Message type is currently not supported." } }],
        "unsupported": { "type": "edit" } }),
    );
    let answered = turn(db, &app, &s, CUSTOMER, vec![unsupported]).await;
    assert_eq!(answered.len(), 1);
    assert!(answered[0].body().starts_with("Não consegui abrir essa mensagem"), "{}", answered[0].body());
    let last = stored(db, s.tenant.id).await.pop().unwrap();
    assert_eq!((last.0.as_str(), last.2), ("unsupported", Some(131051)));
});

contract!(a_number_change_keeps_one_contact_with_its_booking, |db| async move {
    let (s, app) = app(db).await;
    let customer = s.customer(db, CUSTOMER).await;
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": next_weekday_at_14h() });
    let booked = s.call_at(&customer, "create_booking", input, chrono::Utc::now()).await;
    crate::support::scenario::executed(booked);
    app.drain_turns().await; // the customer's first message
    let before = contacts(db, s.tenant.id).await;
    let answered = inbox(db, s.tenant.id, CUSTOMER).await.len();

    // Meta's v12+ notice (`wa_id`), from the old number.
    let changed = json!({ "body": format!("User Sheena Nelson changed from {CUSTOMER} to {NEW_NUMBER}"),
        "wa_id": NEW_NUMBER, "type": "user_changed_number" });
    notice(&app, CUSTOMER, "wamid.n1", changed).await;
    assert_eq!(inbox(db, s.tenant.id, CUSTOMER).await.len(), answered, "nothing goes to the old number");

    let mine = turn(db, &app, &s, NEW_NUMBER, vec![text("wamid.n2", NEW_NUMBER, "meus horários")]).await;
    assert_eq!(contacts(db, s.tenant.id).await, before, "one contact, at its new number");
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert!(mine[0].body().contains("Corte masculino"), "its booking is still its own: {}", mine[0].body());
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);
    let conversation = db.store.conversation_of_contact(s.tenant.id, customer.contact).await.unwrap();
    assert_eq!(conversation, Some(customer.conversation));
    let stored_number: (String, Option<String>) = crate::raw_pool!(db, pool => sqlx::query_as(
        "SELECT external_key, wa_id FROM contacts WHERE tenant_id = $1 AND id = $2")
        .bind(s.tenant.id.0).bind(customer.contact.0).fetch_one(&pool).await.unwrap());
    let new = balcao::domain::PhoneE164::parse(NEW_NUMBER).unwrap();
    assert_eq!(stored_number, (new.match_key(), Some(NEW_NUMBER.to_owned())), "stored as WhatsApp reports it");

    // Redelivered, the notice is a duplicate: no contact comes back for the old number.
    let redelivered =
        notice(&app, CUSTOMER, "wamid.n1", json!({ "body": "…", "wa_id": NEW_NUMBER, "type": "user_changed_number" }));
    redelivered.await;
    assert_eq!(contacts(db, s.tenant.id).await, before);

    // The older shape (`new_wa_id`, webhook v11 and before) moves it again.
    notice(
        &app,
        NEW_NUMBER,
        "wamid.n3",
        json!({ "body": "NAME changed from PHONE to PHONE",
        "new_wa_id": THIRD_NUMBER, "type": "customer_changed_number" }),
    )
    .await;
    let mine = turn(db, &app, &s, THIRD_NUMBER, vec![text("wamid.n4", THIRD_NUMBER, "meus horários")]).await;
    assert!(mine[0].body().contains("Corte masculino"), "{}", mine[0].body());
    assert_eq!(contacts(db, s.tenant.id).await, before);
    assert!(inbox(db, s.tenant.id, NEW_NUMBER).await.len() == 1, "the notice itself is not answered");
});

/// Posts a `system` notice from `from` as Meta does: without `contacts[]`.
async fn notice(app: &TestApp, from: &str, wamid: &str, system: Value) {
    let message = element(from, wamid, "system", json!({ "system": system }));
    let mut body = envelope(PHONE_NUMBER_ID, from, vec![message]);
    body["entry"][0]["changes"][0]["value"].as_object_mut().unwrap().remove("contacts");
    assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
    app.drain_turns().await;
}

contract!(a_first_contact_opening_the_chat_gets_the_welcome, |db| async move {
    let (s, app) = app(db).await;
    let welcome = turn(db, &app, &s, CUSTOMER, vec![element(CUSTOMER, "wamid.w1", "request_welcome", json!({}))]).await;
    assert_eq!(welcome.len(), 1);
    assert!(welcome[0].body().contains("Como posso ajudar?"), "{}", welcome[0].body());
    assert_eq!(stored(db, s.tenant.id).await[0].0, "request_welcome");
});

contract!(media_is_stored_with_its_kind_and_answered_once_per_turn, |db| async move {
    let (s, app) = app(db).await;
    let kinds = ["image", "video", "document", "sticker", "location", "contacts"];
    for (n, kind) in kinds.iter().enumerate() {
        let answers = turn(db, &app, &s, CUSTOMER, vec![media(&format!("wamid.m{n}"), kind)]).await;
        assert_eq!(answers.len(), 1, "{kind}");
        assert!(answers[0].body().contains("só consigo ler texto"), "{kind}: {}", answers[0].body());
        assert!(matches!(answers[0], OutboundMessage::Buttons { .. }), "with the menu's buttons");
    }
    let rows = stored(db, s.tenant.id).await;
    let labels: Vec<(&str, Option<&str>)> = rows.iter().map(|(k, b, _)| (k.as_str(), b.as_deref())).collect();
    assert_eq!(
        labels,
        [
            ("image", Some("esse corte")),
            ("video", Some("Timelapse")),
            ("document", Some("my receipt")),
            ("sticker", None),
            ("location", Some("Philz Coffee, 101 Forest Ave, Palo Alto, CA 94301")),
            ("contacts", Some("Barbara J. Johnson")),
        ]
    );
    // Three photos in one turn: one answer.
    let album: Vec<Value> = (0..3).map(|n| media(&format!("wamid.album{n}"), "image")).collect();
    assert_eq!(turn(db, &app, &s, CUSTOMER, album).await.len(), 1);
});

contract!(an_interactive_meta_could_not_render_is_kept_and_answered, |db| async move {
    let (s, app) = app(db).await;
    // pywa's fixture: `type: interactive` without its object, the error beside `messages[]`.
    let message = json!({ "context": { "from": "15550783881", "id": "wamid.gvwegfretge==" }, "from": CUSTOMER,
        "id": "wamid.wegrchytvwcggt=", "timestamp": now(), "type": "interactive" });
    let mut body = envelope(PHONE_NUMBER_ID, CUSTOMER, vec![message]);
    body["entry"][0]["changes"][0]["value"]["errors"] = json!([{ "code": 131000, "title": "Something went wrong",
        "message": "Something went wrong", "error_data": { "details": "Unsupported webhook payload" } }]);
    assert_eq!(app.post_webhook(&bytes(&body)).await.status(), 200);
    app.drain_turns().await;
    let rows = stored(db, s.tenant.id).await;
    assert_eq!(rows, [("interactive".to_owned(), None, Some(131000))]);
    let answers = inbox(db, s.tenant.id, CUSTOMER).await;
    assert_eq!(answers.len(), 1);
    assert!(answers[0].body().starts_with("Não consegui abrir essa mensagem"), "{}", answers[0].body());
    assert_eq!(db.store.count_inbound(s.tenant.id).await.unwrap(), 1);
});

contract!(a_deletion_takes_the_words_out_of_the_models_history, |db| async move {
    use crate::support::fake_model::{FakeModel, says};
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, crate::support::agent::agent_config(&fake, &[])).await;
    fake.push(says("Anotado."));
    turn(db, &app, &s, CUSTOMER, vec![text("wamid.d1", CUSTOMER, "meu cartão é 4111 1111 1111 1111")]).await;
    assert!(turn(db, &app, &s, CUSTOMER, vec![revoke("wamid.d2", "wamid.d1")]).await.is_empty());
    assert_eq!(fake.requests().len(), 1, "a deletion calls no model");
    fake.push(says("Oi!"));
    turn(db, &app, &s, CUSTOMER, vec![text("wamid.d3", CUSTOMER, "oi")]).await;
    let history = fake.requests()[1].1["messages"].to_string();
    assert!(!history.contains("4111"), "{history}");
    assert!(history.contains("[mensagem apagada pelo cliente]"), "{history}");
});
