//! Human handoff end to end: the console takes a conversation over (the bot stays quiet, no
//! model call), replies once however often the form is posted, gives it back; a customer who
//! types "atendente" is flagged and the staff notified once, even when the turn is retried; an
//! idle handoff ends by itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use balcao::domain::ConversationId;
use balcao::jobs::{Turn, TurnHandler};
use balcao::store::{ConversationViewStore, HandoffStore, OutboxStore};
use chrono::{TimeDelta, Utc};
use reqwest::StatusCode;

use crate::contract;
use crate::support::agent::agent_config;
use crate::support::common::{TestApp, TestDb};
use crate::support::console::{Console, conversation_of, field_value};
use crate::support::fake_model::{FakeModel, says};
use crate::support::payloads::{bytes, text_payload};
use crate::support::scenario::{STAFF, Scenario};

const CUSTOMER: &str = "5511999990001";

/// The bodies of the outbox rows whose key starts with `prefix`, to `wa_id`.
async fn sent(db: &TestDb, s: &Scenario, wa_id: &str) -> Vec<(String, String)> {
    db.store
        .outbound_for_wa_id(s.tenant.id, wa_id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.idempotency_key, r.message.0.body().to_owned()))
        .collect()
}

async fn say(app: &TestApp, wamid: &str, from: &str, body: &str) {
    assert_eq!(app.post_webhook(&bytes(&text_payload(wamid, from, body))).await.status(), 200);
    app.drain_turns().await;
}

contract!(a_taken_over_conversation_gets_no_bot_reply_until_it_is_given_back, |db| async move {
    let fake = FakeModel::start(vec![says("Olá! Como posso ajudar?")]).await;
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    say(&app, "wamid.h1", CUSTOMER, "oi").await;
    assert_eq!(sent(db, &s, CUSTOMER).await.len(), 1);
    let id = conversation_of(db, s.tenant.id, CUSTOMER).await;
    let conversation = ConversationId(id);
    let base = format!("/admin/{}/conversations/{id}", s.tenant.slug);

    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    console.get(&base).await;
    let taken = console.post(&format!("{base}/handoff"), &[]).await;
    assert_eq!((taken.status, taken.location.as_deref()), (StatusCode::SEE_OTHER, Some(base.as_str())));
    let state = db.store.handoff_state(s.tenant.id, conversation).await.unwrap();
    assert!(state.is_active(Utc::now()));

    // The customer writes: no model call, no reply; the message is in the transcript.
    say(&app, "wamid.h2", CUSTOMER, "tem horário amanhã?").await;
    assert_eq!(fake.requests().len(), 1, "no model call while a person has the conversation");
    assert_eq!(sent(db, &s, CUSTOMER).await.len(), 1, "no bot reply");
    let page = console.get(&base).await;
    assert!(page.body.contains("tem horário amanhã?") && page.body.contains("humano"), "{}", page.body);

    // Each customer message pushes the end forward by the idle time (30 minutes by default).
    let soon = Utc::now() + TimeDelta::minutes(1);
    db.store.take_over(s.tenant.id, conversation, soon).await.unwrap();
    say(&app, "wamid.h3", CUSTOMER, "alô?").await;
    let until = db.store.handoff_state(s.tenant.id, conversation).await.unwrap().handoff_until.unwrap();
    assert!(until > soon + TimeDelta::minutes(20), "{until} was not pushed forward");
    assert_eq!(sent(db, &s, CUSTOMER).await.len(), 1);

    // A console reply, posted twice with the same form: one message.
    let page = console.get(&base).await;
    let key = field_value(&page.body, "reply_key").expect("a reply key");
    for _ in 0..2 {
        let posted = console.post(&format!("{base}/reply"), &[("text", "Oi, aqui é o Zé!"), ("reply_key", &key)]).await;
        assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    }
    let replies: Vec<_> = sent(db, &s, CUSTOMER).await.into_iter().filter(|(k, _)| k.starts_with("console:")).collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].1, "Oi, aqui é o Zé!");
    // A new render draws a new key: a second reply is a second message.
    let page = console.get(&base).await;
    let again = field_value(&page.body, "reply_key").unwrap();
    assert_ne!(again, key);
    console.post(&format!("{base}/reply"), &[("text", "Mais uma coisa"), ("reply_key", &again)]).await;
    assert_eq!(sent(db, &s, CUSTOMER).await.iter().filter(|(k, _)| k.starts_with("console:")).count(), 2);

    // Given back: the bot answers again.
    console.post(&format!("{base}/release"), &[]).await;
    assert!(!db.store.handoff_state(s.tenant.id, conversation).await.unwrap().is_active(Utc::now()));
    fake.push(says("De volta ao bot!"));
    say(&app, "wamid.h4", CUSTOMER, "e aí?").await;
    assert_eq!(sent(db, &s, CUSTOMER).await.last().unwrap().1, "De volta ao bot!");
    assert_eq!(fake.requests().len(), 2);
});

contract!(an_idle_handoff_ends_by_itself, |db| async move {
    let fake = FakeModel::start(vec![says("Olá!")]).await;
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    say(&app, "wamid.i1", CUSTOMER, "oi").await;
    let conversation = ConversationId(conversation_of(db, s.tenant.id, CUSTOMER).await);
    // Taken over a while ago and idle since: its end has passed.
    db.store.take_over(s.tenant.id, conversation, Utc::now() - TimeDelta::minutes(1)).await.unwrap();
    fake.push(says("Voltei a atender."));
    say(&app, "wamid.i2", CUSTOMER, "tem alguém aí?").await;
    assert_eq!(sent(db, &s, CUSTOMER).await.last().unwrap().1, "Voltei a atender.");
    // An ended handoff is not revived by the message.
    assert!(!db.store.handoff_state(s.tenant.id, conversation).await.unwrap().is_active(Utc::now()));
});

/// Runs the real handler, then fails the first attempt: the queue retries the turn.
struct FailFirstAttempt {
    inner: Arc<dyn TurnHandler>,
    failed: AtomicBool,
}

#[async_trait]
impl TurnHandler for FailFirstAttempt {
    async fn handle(&self, turn: &Turn) -> anyhow::Result<()> {
        self.inner.handle(turn).await?;
        if !self.failed.swap(true, Ordering::SeqCst) {
            anyhow::bail!("crashed after the work, before completing");
        }
        Ok(())
    }
}

contract!(atendente_flags_the_request_and_notifies_the_staff_once_even_when_retried, |db| async move {
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn_with(db, agent_config(&fake, &[]), |ctx| {
        let gate = balcao::turns::HandoffGate::wrap(Arc::new(Unreachable), &ctx);
        Arc::new(FailFirstAttempt { inner: gate, failed: AtomicBool::new(false) })
    })
    .await;
    say(&app, "wamid.a1", CUSTOMER, "  Atendênte! ").await;
    // The retry, due after its backoff (counted from the first attempt's clock).
    let retry = app.worker.run_next_at(Utc::now() + TimeDelta::minutes(10)).await.unwrap();
    assert!(matches!(retry, balcao::jobs::RunOutcome::Completed(_)), "{retry:?}");
    let jobs = db.store.recent_turns(s.tenant.id, ConversationId(conversation_of(db, s.tenant.id, CUSTOMER).await), 5);
    let jobs = jobs.await.unwrap();
    assert_eq!((jobs[0].state.as_str(), jobs[0].attempts), ("completed", 2), "the turn was retried");

    let conversation = ConversationId(conversation_of(db, s.tenant.id, CUSTOMER).await);
    let state = db.store.handoff_state(s.tenant.id, conversation).await.unwrap();
    assert!(state.handoff_requested_at.is_some() && state.is_active(Utc::now()));
    let to_customer = sent(db, &s, CUSTOMER).await;
    assert_eq!(to_customer.len(), 1, "{to_customer:?}");
    assert!(to_customer[0].1.contains("Chamei alguém da equipe da Barbearia do Zé"), "{}", to_customer[0].1);
    let to_staff = sent(db, &s, STAFF).await;
    assert_eq!(to_staff.len(), 1, "{to_staff:?}");
    assert!(
        to_staff[0].1.contains(&format!("Sheena pediu para falar com um atendente (conversa nº {})", conversation.0)),
        "{}",
        to_staff[0].1
    );
    assert!(!to_staff[0].1.contains("http"), "link-free");
    assert!(!to_staff[0].1.contains("Nelson") && !to_staff[0].1.contains("99999"), "the first name only");
    assert!(fake.requests().is_empty());

    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let list = console.get(&format!("/admin/{}/conversations", s.tenant.slug)).await;
    assert!(list.body.contains("pediu atendente") && list.body.contains("humano"), "{}", list.body);
    // Taking over answers the request.
    console.get(&format!("/admin/{}/conversations/{}", s.tenant.slug, conversation.0)).await;
    console.post(&format!("/admin/{}/conversations/{}/handoff", s.tenant.slug, conversation.0), &[]).await;
    assert!(db.store.handoff_state(s.tenant.id, conversation).await.unwrap().handoff_requested_at.is_none());
});

/// The customer handler behind the gate: "atendente" must never reach it.
struct Unreachable;

#[async_trait]
impl TurnHandler for Unreachable {
    async fn handle(&self, _turn: &Turn) -> anyhow::Result<()> {
        anyhow::bail!("the wrapped handler was called")
    }
}

contract!(staff_are_never_handed_off, |db| async move {
    let fake = FakeModel::start(vec![says("Menu da equipe")]).await;
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    say(&app, "wamid.s1", STAFF, "atendente").await;
    let conversation = ConversationId(conversation_of(db, s.tenant.id, STAFF).await);
    let state = db.store.handoff_state(s.tenant.id, conversation).await.unwrap();
    assert_eq!(state.handoff_requested_at, None);
    assert_eq!(state.handoff_until, None);
    assert_eq!(sent(db, &s, STAFF).await.last().unwrap().1, "Menu da equipe");
});

contract!(a_console_reply_outside_the_24_hour_window_is_refused, |db| async move {
    use balcao::store::InboundStore;
    use balcao::whatsapp::{ContactIdentity, InboundContent, NewInbound};
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, crate::support::common::local_test_config("http://127.0.0.1:9", &[])).await;
    // The customer's last message is two days old: WhatsApp allows only templates now.
    let message = NewInbound {
        provider_message_id: "wamid.old".into(),
        contact: ContactIdentity {
            wa_id: Some(balcao::domain::PhoneE164::parse(CUSTOMER).unwrap()),
            user_id: None,
            username: None,
            profile_name: Some("Ana".into()),
        },
        content: InboundContent::Text { body: "oi".into() },
        context_id: None,
        sent_at: None,
        raw: serde_json::json!({}),
        simulated_by: None,
        sender_hashes: Vec::new(),
    };
    let two_days_ago = Utc::now() - TimeDelta::days(2);
    db.store
        .record_inbound(
            s.tenant.id,
            &message,
            balcao::store::JobKind::Turn,
            &crate::support::queue::timing(0, 0, 5),
            two_days_ago,
        )
        .await
        .unwrap();
    let id = conversation_of(db, s.tenant.id, CUSTOMER).await;
    let base = format!("/admin/{}/conversations/{id}", s.tenant.slug);
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let page = console.get(&base).await;
    let key = field_value(&page.body, "reply_key").expect("a reply key");
    let refused = console.post(&format!("{base}/reply"), &[("text", "Oi, Ana!"), ("reply_key", &key)]).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(refused.body.contains("24 horas"), "{}", refused.body);
    assert!(sent(db, &s, CUSTOMER).await.is_empty(), "nothing queued to fail later");
});

contract!(a_takeover_during_a_model_call_silences_its_answer, |db| async move {
    let mut slow = says("Uma resposta que chega tarde demais");
    // Long enough for the takeover below to land while the model is still answering.
    slow.delay = std::time::Duration::from_secs(3);
    let fake = FakeModel::start(vec![slow]).await;
    let s = Scenario::with_merchant(db).await;
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    assert_eq!(app.post_webhook(&bytes(&text_payload("wamid.late", CUSTOMER, "oi"))).await.status(), 200);
    let turn = tokio::spawn(async move {
        app.drain_turns().await;
        app
    });
    while fake.requests().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let conversation = ConversationId(conversation_of(db, s.tenant.id, CUSTOMER).await);
    db.store.take_over(s.tenant.id, conversation, Utc::now() + TimeDelta::minutes(30)).await.unwrap();
    let _app = turn.await.unwrap();
    assert_eq!(fake.requests().len(), 1, "the model was asked");
    assert!(sent(db, &s, CUSTOMER).await.is_empty(), "its answer never reached the outbox");
});
