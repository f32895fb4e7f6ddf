//! Erasure that leaves nothing, on both databases: a scan of every table and column (read from
//! the schema) finds no trace of the person, the staff's copies included; a redelivery of a
//! message sent before the erasure re-creates nothing, while a new message starts an empty
//! contact; an action confirmed but not run is cancelled and the staff told; message ids
//! stored raw by an older version are hashed. With them, the trust fixes at the action
//! boundary: a click received in time is honoured after the expiry sweep, and a booking action
//! retried after its booking was cancelled books nothing.

use balcao::actions::{ActionStatus, ConfirmedVia};
use balcao::domain::{ActionId, ClickId, ContactId, Decision, TenantId};
use balcao::store::{ActionStore, BookingStore, ChargeStore, Decider, InboundStore};
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::contract;
use crate::support::clicks::{CUSTOMER, button, inbox, post, propose_charge};
use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb, local_test_config};
use crate::support::payloads::{bytes, envelope_named};
use crate::support::scenario::{Customer, STAFF, Scenario, local_replier, next_weekday_at_14h};

/// The customer's profile name: distinctive, so a scan for it finds only them, and starting
/// with a capital SQLite's `LOWER` does not fold.
const NAME: &str = "Ângela Quitéria Bezerra";
/// Another customer, who happens to mention the same name and description.
const BYSTANDER: &str = "5511999990002";
/// What the customer typed.
const SAID: &str = "Oi, aqui é a Quitéria e quero cortar o cabelo amanhã cedo";

/// A wamid as Meta makes them: base64 that embeds the sender's number.
fn wamid(n: u32) -> String {
    format!("wamid.HBgNNTUxMTk5OTk5MDAwMRUCABIYIDNFQjBDMEQ3{n:04}")
}

/// A text from the customer, named, sent `ago` seconds before now (negative: in the future).
fn said(wamid: &str, body: &str, ago: i64) -> Vec<u8> {
    let sent = (Utc::now().timestamp() - ago).to_string();
    let message = json!({ "from": CUSTOMER, "id": wamid, "timestamp": sent, "type": "text", "text": { "body": body } });
    bytes(&envelope_named(PHONE_NUMBER_ID, CUSTOMER, NAME, vec![message]))
}

async fn contact_of(db: &TestDb, tenant: TenantId, wa_id: &str) -> Option<ContactId> {
    let id: Option<i64> = crate::raw_pool!(db, pool => sqlx::query_scalar(
        "SELECT id FROM contacts WHERE tenant_id = $1 AND wa_id = $2")
        .bind(tenant.0).bind(wa_id).fetch_optional(&pool).await.unwrap());
    id.map(ContactId)
}

async fn count(db: &TestDb, sql: &'static str, tenant: TenantId) -> i64 {
    crate::raw_pool!(db, pool => sqlx::query_scalar(sql).bind(tenant.0).fetch_one(&pool).await.unwrap())
}

/// Every (table, column) of the schema, as the database describes itself.
async fn columns(db: &TestDb) -> Vec<(String, String)> {
    if db.sqlite.is_some() {
        crate::raw_pool!(db, pool => sqlx::query_as(
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'")
            .fetch_all(&pool).await.unwrap())
    } else {
        let schema = db.pg.as_ref().unwrap().1.clone();
        crate::raw_pool!(db, pool => sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns WHERE table_schema = $1")
            .bind(&schema).fetch_all(&pool).await.unwrap())
    }
}

/// Where each needle (any case) is still stored: `needle @ table.column` for each hit.
async fn traces_of(db: &TestDb, needles: &[String]) -> Vec<String> {
    let columns = columns(db).await;
    let mut found = Vec::new();
    crate::raw_pool!(db, pool => {
        for needle in needles {
            // Any non-ASCII character matches any one (SQLite folds only ASCII case).
            let folded: String = needle.to_lowercase().chars().map(|c| if c.is_ascii() { c } else { '_' }).collect();
            let pattern = format!("%{folded}%");
            for (table, column) in &columns {
                let sql = format!("SELECT COUNT(*) FROM {table} WHERE LOWER(CAST({column} AS TEXT)) LIKE $1");
                let hits: i64 =
                    sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&pattern).fetch_one(&pool).await.unwrap();
                if hits > 0 {
                    found.push(format!("{needle} @ {table}.{column}"));
                }
            }
        }
    });
    found
}

async fn traces(db: &TestDb, needle: &str) -> Vec<String> {
    traces_of(db, &[needle.to_owned()]).await
}

async fn erase(db: &TestDb, app: &TestApp, s: &Scenario, contact: ContactId) {
    let replier = local_replier(db);
    let erased = balcao::privacy::erase(&db.store, &replier, &app.privacy_key, &s.tenant, contact, Utc::now());
    assert!(erased.await.unwrap());
}

async fn charges(db: &TestDb, tenant: TenantId) -> usize {
    db.store.charges(tenant, None, Utc::now() - TimeDelta::days(1), 100).await.unwrap().len()
}

contract!(an_erasure_leaves_no_trace_of_the_person_in_any_table, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    for n in 0..2 {
        assert_eq!(app.post_webhook(&said(&wamid(n), SAID, 5)).await.status(), 200);
        app.drain_turns().await;
    }
    // Someone else says the same name and description: theirs to keep.
    let bystander_said = format!("Corte e barba com a {NAME}, por favor");
    let message = json!({ "from": BYSTANDER, "id": "wamid.bystander", "timestamp": (Utc::now().timestamp()).to_string(),
                          "type": "text", "text": { "body": bystander_said } });
    let body = bytes(&envelope_named(PHONE_NUMBER_ID, BYSTANDER, "Outra Pessoa", vec![message]));
    assert_eq!(app.post_webhook(&body).await.status(), 200);
    app.drain_turns().await;
    // The merchant charges them (typing the number in the staff menu), and confirms.
    let confirm = propose_charge(db, &app, &s, "scan").await;
    post(&app, STAFF, button(STAFF, "wamid.scan.click", &confirm)).await;
    app.drain_turns().await;
    assert_eq!(charges(db, s.tenant.id).await, 1);
    let staff_saw = inbox(db, s.tenant.id, STAFF).await;
    assert!(staff_saw.iter().any(|m| m.body().contains("99999-0001") || m.body().contains(CUSTOMER)), "{staff_saw:?}");
    // Before: the scan finds the person, so it can.
    assert!(!traces(db, NAME).await.is_empty());
    assert!(!traces(db, &wamid(0)).await.is_empty());

    let contact = contact_of(db, s.tenant.id, CUSTOMER).await.expect("the customer");
    erase(db, &app, &s, contact).await;
    let kept: Vec<String> = crate::raw_pool!(db, pool => sqlx::query_scalar(
        "SELECT body FROM inbound_messages WHERE body LIKE '%com a%'").fetch_all(&pool).await.unwrap());
    assert_eq!(kept, [bystander_said], "another customer's message was redacted");

    let needles = [
        CUSTOMER.to_owned(),
        // Without the ninth digit, and as the staff typed it.
        "551199990001".to_owned(),
        "99999-0001".to_owned(),
        NAME.to_owned(),
        SAID.to_owned(),
        "Corte e barba".to_owned(),
        wamid(0),
        wamid(1),
        // The base64 that carries the number inside every wamid.
        "NTUxMTk5OTk5MDAwMR".to_owned(),
    ];
    let left = traces_of(db, &needles).await;
    // The bystander's own message, and only it, still says the name and the description.
    assert!(
        left.iter().all(|at| at.ends_with("inbound_messages.body") || at.ends_with("inbound_messages.raw")),
        "{left:?}"
    );
    assert_eq!(left.len(), 4, "survived the erasure: {left:?}");
    // The books stay: the charge's amount and status, the staff member's own contact.
    let kept = db.store.charges(s.tenant.id, None, Utc::now() - TimeDelta::days(1), 10).await.unwrap();
    assert_eq!((kept.len(), kept[0].amount_cents), (1, 5000));
    assert!(contact_of(db, s.tenant.id, STAFF).await.is_some());
});

contract!(a_redelivery_from_before_an_erasure_brings_nothing_back, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 60)).await.status(), 200);
    app.drain_turns().await;
    let contact = contact_of(db, s.tenant.id, CUSTOMER).await.expect("the customer");
    erase(db, &app, &s, contact).await;
    let contacts = count(db, "SELECT COUNT(*) FROM contacts WHERE tenant_id = $1", s.tenant.id).await;
    let inbound = db.store.count_inbound(s.tenant.id).await.unwrap();

    // Meta redelivers the old message, and delivers late one sent before the erasure.
    for (id, ago) in [(wamid(0), 60), (wamid(1), 30)] {
        assert_eq!(app.post_webhook(&said(&id, SAID, ago)).await.status(), 200);
    }
    app.drain_turns().await;
    assert_eq!(count(db, "SELECT COUNT(*) FROM contacts WHERE tenant_id = $1", s.tenant.id).await, contacts);
    assert_eq!(db.store.count_inbound(s.tenant.id).await.unwrap(), inbound);
    assert_eq!(contact_of(db, s.tenant.id, CUSTOMER).await, None);
    assert!(traces(db, NAME).await.is_empty());

    // Writing after the erasure: a new contact, with nothing of the old one.
    assert_eq!(app.post_webhook(&said(&wamid(2), "oi de novo", -2)).await.status(), 200);
    app.drain_turns().await;
    let fresh = contact_of(db, s.tenant.id, CUSTOMER).await.expect("a new contact");
    assert_ne!(fresh, contact);
    // A message sent before the erasure and delivered only now: the person is known again,
    // but it is still dropped.
    assert_eq!(app.post_webhook(&said(&wamid(3), SAID, 90)).await.status(), 200);
    app.drain_turns().await;
    let conversation = db.store.conversation_of_contact(s.tenant.id, fresh).await.unwrap().unwrap();
    let theirs: i64 = crate::raw_pool!(db, pool => sqlx::query_scalar(
        "SELECT COUNT(*) FROM inbound_messages WHERE conversation_id = $1")
        .bind(conversation.0).fetch_one(&pool).await.unwrap());
    assert_eq!(theirs, 1);
});

/// The staff member's decider for a click with message id `message`.
async fn staff_decider<'a>(db: &TestDb, s: &Scenario, message: &'a str) -> Decider<'a> {
    let contact = contact_of(db, s.tenant.id, STAFF).await.expect("staff contact");
    let conversation = db.store.conversation_of_contact(s.tenant.id, contact).await.unwrap().unwrap();
    Decider {
        tenant: s.tenant.id,
        conversation,
        contact,
        staff: true,
        via: ConfirmedVia::Button,
        message,
        simulator: None,
    }
}

contract!(an_action_confirmed_before_an_erasure_is_cancelled_not_run, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    app.drain_turns().await;
    let confirm = propose_charge(db, &app, &s, "c").await;
    let click = ClickId::parse(&confirm).unwrap();
    // Confirmed by a worker that died before running it.
    let by = staff_decider(db, &s, "m1:a-click-whose-worker-died").await;
    assert!(db.store.decide_action(click.action, Decision::Confirm, &by, Utc::now()).await.unwrap());

    let contact = contact_of(db, s.tenant.id, CUSTOMER).await.unwrap();
    erase(db, &app, &s, contact).await;
    let action = db.store.action(s.tenant.id, click.action).await.unwrap().unwrap();
    assert_eq!(action.status, ActionStatus::Cancelled);
    let told = inbox(db, s.tenant.id, STAFF).await;
    assert!(told.last().unwrap().body().contains("R$ 50,00 que você confirmou não foi feita"), "{:?}", told.last());

    // The click's retry, and another tap: nothing runs, on placeholders or otherwise.
    post(&app, STAFF, button(STAFF, "wamid.c.click", &confirm)).await;
    app.drain_turns().await;
    assert_eq!(charges(db, s.tenant.id).await, 0);
    assert!(inbox(db, s.tenant.id, STAFF).await.last().unwrap().body().contains("já tinha sido cancelada"));
    let replier = local_replier(db);
    let again = balcao::privacy::erase(&db.store, &replier, &app.privacy_key, &s.tenant, contact, Utc::now());
    assert!(!again.await.unwrap(), "a second erasure changes nothing and tells no one twice");
});

contract!(message_ids_stored_raw_by_an_older_version_are_hashed_once, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    app.drain_turns().await;
    let hashed = app.privacy_key.message_id(&wamid(0));
    // What an older version stored: the raw wamid.
    crate::raw_pool!(db, pool => sqlx::query("UPDATE inbound_messages SET provider_message_id = $1 WHERE provider_message_id = $2")
        .bind(wamid(0)).bind(&hashed).execute(&pool).await.map(|_| ()).unwrap());

    assert!(db.store.hash_stored_message_ids(&app.privacy_key).await.unwrap() >= 1);
    assert_eq!(db.store.hash_stored_message_ids(&app.privacy_key).await.unwrap(), 0);
    let left = traces(db, "HBgN").await;
    assert!(left.iter().all(|at| at.ends_with("inbound_messages.raw")), "{left:?}");
    // Meta redelivers it: a duplicate.
    let inbound = db.store.count_inbound(s.tenant.id).await.unwrap();
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    assert_eq!(db.store.count_inbound(s.tenant.id).await.unwrap(), inbound);
});

contract!(a_click_received_in_time_is_honoured_after_the_expiry_sweep, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    app.drain_turns().await;
    let confirm = propose_charge(db, &app, &s, "t").await;
    // The tap arrives in time; its job has not run when the sweep passes after the expiry.
    post(&app, STAFF, button(STAFF, "wamid.t.click", &confirm)).await;
    let later = Utc::now() + TimeDelta::hours(2);
    assert!(db.store.expire_actions(later, 100, &|_, _| None).await.unwrap().is_empty());
    app.drain_turns().await;
    assert_eq!(charges(db, s.tenant.id).await, 1);
    let action = db.store.action(s.tenant.id, ClickId::parse(&confirm).unwrap().action).await.unwrap().unwrap();
    assert_eq!(action.status, ActionStatus::Executed);
});

contract!(a_booking_action_retried_after_its_booking_was_cancelled_books_nothing, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    app.drain_turns().await;
    let contact = contact_of(db, s.tenant.id, CUSTOMER).await.unwrap();
    let c = Customer {
        contact,
        conversation: db.store.conversation_of_contact(s.tenant.id, contact).await.unwrap().unwrap(),
    };
    let start = next_weekday_at_14h();
    let input = json!({ "service_id": s.corte, "professional_id": s.ze, "starts_at": start });
    let proposal: Value = match s.call_at(&c, "propose_booking", input, Utc::now()).await {
        balcao::ledger::Outcome::Executed(v) => v,
        other => panic!("{other:?}"),
    };
    let action = ActionId::parse(proposal["action_id"].as_str().unwrap()).unwrap();
    let yes = ClickId::new(action, Decision::Confirm).id();
    post(&app, CUSTOMER, crate::support::clicks::button(CUSTOMER, "wamid.b.1", &yes)).await;
    app.drain_turns().await;
    let booked = db.store.upcoming_appointments(s.tenant.id, contact, Utc::now()).await.unwrap();
    assert_eq!(booked.len(), 1);
    // The worker crashed after booking, before marking the action done.
    crate::raw_pool!(db, pool => sqlx::query("UPDATE pending_actions SET status = 'confirmed', result = NULL WHERE id = $1")
        .bind(action.to_string()).execute(&pool).await.map(|_| ()).unwrap());
    // The customer cancels the booking; then the old Confirmar is tapped again.
    s.cancel(&c, &json!(booked[0].id)).await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);
    post(&app, CUSTOMER, button(CUSTOMER, "wamid.b.2", &yes)).await;
    app.drain_turns().await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0, "the old slot was booked again");
    let ended = db.store.action(s.tenant.id, action).await.unwrap().unwrap();
    assert_eq!(ended.status, ActionStatus::Failed);
    assert!(ended.error.as_deref().is_some_and(|e| e.contains("undone")), "{:?}", ended.error);
});

/// The customer's message `body`, sent `ago` seconds before now, as the intake parses it.
fn parsed(app: &TestApp, wamid: &str, body: &str, ago: i64) -> balcao::whatsapp::NewInbound {
    let value: Value = serde_json::from_slice(&said(wamid, body, ago)).unwrap();
    let mut batch = balcao::whatsapp::webhook::parse_batch(&value, &app.privacy_key);
    batch.changes.remove(0).messages.remove(0)
}

/// Inbound rows of the tenant whose body is `body`, and how many of them sit in `conversation`.
async fn stored_bodies(db: &TestDb, tenant: TenantId, body: &str, conversation: i64) -> (i64, i64) {
    crate::raw_pool!(db, pool => {
        let all: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM inbound_messages WHERE tenant_id = $1 AND body = $2")
            .bind(tenant.0).bind(body).fetch_one(&pool).await.unwrap();
        let there: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM inbound_messages WHERE tenant_id = $1 AND conversation_id = $2 AND body IS NOT NULL")
            .bind(tenant.0).bind(conversation).fetch_one(&pool).await.unwrap();
        (all, there)
    })
}

contract!(a_message_read_before_an_erasure_and_written_after_it_is_dropped_or_starts_a_new_contact, |db| async move {
    use balcao::store::{ConversationRef, IntakeStore, IntakeWrite, JobKind, Recorded, TurnTiming, Written};
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    app.drain_turns().await;
    let contact = contact_of(db, s.tenant.id, CUSTOMER).await.unwrap();
    let late = parsed(&app, &wamid(1), "mensagem que cruzou o apagamento", 5);
    // The intake's read finds the conversation; the erasure commits; then the intake writes.
    let known = db.store.resolve_conversation(s.tenant.id, &late.contact).await.unwrap();
    let ConversationRef::Known(erased_conversation) = known.clone() else { panic!("a known contact: {known:?}") };
    erase(db, &app, &s, contact).await;
    let timing = TurnTiming { debounce: TimeDelta::zero(), debounce_max: TimeDelta::zero(), max_attempts: 5 };
    let write =
        IntakeWrite::Message { tenant: s.tenant.id, conversation: known.clone(), message: late, kind: JobKind::Turn };
    let written = db.store.write_intake(&write, &timing, Utc::now()).await.unwrap();
    assert_eq!(written, Written::Message(Recorded::Erased), "sent before the erasure: dropped");
    assert_eq!(stored_bodies(db, s.tenant.id, "mensagem que cruzou o apagamento", erased_conversation.0).await, (0, 0));
    assert!(app.drain_turns().await.is_empty(), "no turn runs for the erased conversation");
    // The same stale read for a message sent after the erasure: a new, empty contact's first.
    let after = parsed(&app, &wamid(2), "voltei depois", -60);
    let write = IntakeWrite::Message { tenant: s.tenant.id, conversation: known, message: after, kind: JobKind::Turn };
    match db.store.write_intake(&write, &timing, Utc::now()).await.unwrap() {
        Written::Message(Recorded::New { conversation, .. }) => assert_ne!(conversation, erased_conversation),
        other => panic!("a new contact's message: {other:?}"),
    }
    assert_eq!(stored_bodies(db, s.tenant.id, "voltei depois", erased_conversation.0).await, (1, 0));
    assert_ne!(contact_of(db, s.tenant.id, CUSTOMER).await, Some(contact));
});

contract!(erasures_racing_the_intake_leave_nothing_of_the_person, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    let replier = local_replier(db);
    for round in 0..12u32 {
        let from = format!("55119888{round:05}");
        let first = json!({ "from": from, "id": format!("wamid.race.{round}.a"), "timestamp": (Utc::now().timestamp() - 5).to_string(),
                            "type": "text", "text": { "body": format!("primeira {round}") } });
        assert_eq!(
            app.post_webhook(&bytes(&envelope_named(PHONE_NUMBER_ID, &from, NAME, vec![first]))).await.status(),
            200
        );
        let contact = contact_of(db, s.tenant.id, &from).await.unwrap();
        let text = format!("cruzou o apagamento {round}");
        let second = json!({ "from": from, "id": format!("wamid.race.{round}.b"), "timestamp": (Utc::now().timestamp() - 1).to_string(),
                             "type": "text", "text": { "body": text } });
        let body = bytes(&envelope_named(PHONE_NUMBER_ID, &from, NAME, vec![second]));
        let (posted, erased) = tokio::join!(app.post_webhook(&body), async {
            balcao::privacy::erase(&db.store, &replier, &app.privacy_key, &s.tenant, contact, Utc::now()).await.unwrap()
        });
        assert_eq!(posted.status(), 200);
        assert!(erased);
        app.drain_turns().await;
        // Landed before the erasure and erased with it, or dropped: either way nowhere.
        let conversation = db.store.conversation_of_contact(s.tenant.id, contact).await.unwrap().unwrap();
        assert_eq!(stored_bodies(db, s.tenant.id, &text, conversation.0).await, (0, 0), "round {round}");
        let history: i64 = crate::raw_pool!(db, pool => sqlx::query_scalar(
            "SELECT COUNT(*) FROM conversation_messages WHERE tenant_id = $1 AND conversation_id = $2")
            .bind(s.tenant.id.0).bind(conversation.0).fetch_one(&pool).await.unwrap());
        assert_eq!(history, 0, "round {round}: a turn wrote history back");
    }
    assert!(traces(db, NAME).await.is_empty(), "{:?}", traces(db, NAME).await);
});

contract!(a_second_erasure_scrubs_what_reached_the_conversation_since, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    app.drain_turns().await;
    let contact = contact_of(db, s.tenant.id, CUSTOMER).await.unwrap();
    erase(db, &app, &s, contact).await;
    let conversation = db.store.conversation_of_contact(s.tenant.id, contact).await.unwrap().unwrap();
    // What an older version let in: a message that raced the erasure.
    crate::raw_pool!(db, pool => sqlx::query(
        "UPDATE inbound_messages SET body = $1 WHERE tenant_id = $2 AND conversation_id = $3")
        .bind(SAID).bind(s.tenant.id.0).bind(conversation.0).execute(&pool).await.map(|_| ()).unwrap());
    assert!(!traces(db, "Quitéria e quero").await.is_empty());
    let replier = local_replier(db);
    let again = balcao::privacy::erase(&db.store, &replier, &app.privacy_key, &s.tenant, contact, Utc::now());
    assert!(!again.await.unwrap(), "it was erased before");
    assert!(traces(db, "Quitéria e quero").await.is_empty(), "{:?}", traces(db, "Quitéria e quero").await);
});

contract!(an_erasure_keeps_a_staff_message_about_the_same_number_in_another_area_code, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(app.post_webhook(&said(&wamid(0), SAID, 5)).await.status(), 200);
    // The staff write about the customer (+55 11 99999-0001) and about someone in Rio.
    let about_them = "ligar para 11 99999-0001 amanhã";
    let about_rio = "ligar para (21) 99999-0001 amanhã";
    for (n, text) in [about_them, about_rio].into_iter().enumerate() {
        let message = json!({ "from": STAFF, "id": format!("wamid.staff.{n}"), "timestamp": (Utc::now().timestamp() - 5).to_string(),
                              "type": "text", "text": { "body": text } });
        assert_eq!(
            app.post_webhook(&bytes(&envelope_named(PHONE_NUMBER_ID, STAFF, "Zé", vec![message]))).await.status(),
            200
        );
    }
    app.drain_turns().await;
    let contact = contact_of(db, s.tenant.id, CUSTOMER).await.unwrap();
    erase(db, &app, &s, contact).await;
    let bodies: Vec<String> = crate::raw_pool!(db, pool => sqlx::query_scalar(
        "SELECT body FROM inbound_messages WHERE tenant_id = $1 AND body IS NOT NULL")
        .bind(s.tenant.id.0).fetch_all(&pool).await.unwrap());
    assert!(bodies.iter().any(|b| b == about_rio), "the other person's number is kept: {bodies:?}");
    assert!(!bodies.iter().any(|b| b == about_them), "{bodies:?}");
});
