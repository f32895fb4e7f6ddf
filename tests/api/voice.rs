//! Voice notes against a loopback Graph API (media lookup and download, Bearer token, Meta's
//! error codes) and a loopback OpenAI-compatible transcription endpoint: a booking by voice
//! through the guided menu and through the model, the media fetched and transcribed once under
//! a retried turn, a 20 MB audio refused, a transcription timeout answered once, no endpoint,
//! and the transcript erased with the contact. Both databases.

use std::time::Duration;

use balcao::domain::TenantId;
use balcao::store::{BookingStore, InboundStore};
use balcao::whatsapp::OutboundMessage;
use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};

use crate::contract;
use crate::support::agent::slot;
use crate::support::clicks::{CUSTOMER, button, inbox, pick};
use crate::support::common::{PHONE_NUMBER_ID, TestApp, TestDb, test_config};
use crate::support::console::{Console, conversation_of};
use crate::support::fake_graph::FakeGraph;
use crate::support::fake_model::{FakeModel, says, tool_use};
use crate::support::fake_transcription::{FakeTranscription, Reply};
use crate::support::payloads::{bytes, envelope, now};
use crate::support::scenario::Scenario;

/// A voice note's bytes (an Ogg page header, then a tag that makes each clip distinct).
fn clip(tag: &str) -> Vec<u8> {
    [b"OggS\x00\x02".as_slice(), tag.as_bytes()].concat()
}

/// Meta's voice note element.
fn voice(wamid: &str, media_id: &str) -> Value {
    json!({ "from": CUSTOMER, "id": wamid, "timestamp": now(), "type": "audio",
            "audio": { "mime_type": "audio/ogg; codecs=opus", "sha256": "wvqXMe6n7n1W0zphvLPoLj+s/NtKqmr3zZ7YzTP7xFI=",
                       "id": media_id, "voice": true } })
}

struct Voice {
    s: Scenario,
    app: TestApp,
    graph: FakeGraph,
    ears: FakeTranscription,
}

async fn voice_app(db: &TestDb, extra: &[(&str, &str)], transcription: bool) -> Voice {
    let graph = FakeGraph::start().await;
    let ears = FakeTranscription::start().await;
    let vars = ears.vars();
    let mut all: Vec<(&str, &str)> =
        if transcription { vars.iter().map(|(k, v)| (*k, v.as_str())).collect() } else { vec![] };
    all.push(("BALCAO_TRANSCRIPTION_TIMEOUT_SECONDS", "1"));
    all.extend_from_slice(extra);
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, test_config(&graph.url, &all)).await;
    Voice { s, app, graph, ears }
}

impl Voice {
    /// Posts `message`, runs the turns, returns what the customer got since.
    async fn say(&self, db: &TestDb, message: Value) -> Vec<OutboundMessage> {
        let before = inbox(db, self.s.tenant.id, CUSTOMER).await.len();
        let status = self.app.post_webhook(&bytes(&envelope(PHONE_NUMBER_ID, CUSTOMER, vec![message]))).await.status();
        assert_eq!(status, 200);
        // A turn that failed is retried after its backoff (a millisecond or so here).
        while self.app.drain_turns().await.iter().any(|o| matches!(o, balcao::jobs::RunOutcome::WillRetry(_))) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        inbox(db, self.s.tenant.id, CUSTOMER).await.split_off(before)
    }

    /// A voice note saying `words`, served by the Graph fake and heard by the transcription fake.
    fn record(&self, media_id: &str, words: &str) {
        let audio = clip(media_id);
        self.graph.add_media(media_id, "audio/ogg; codecs=opus", &audio, None);
        self.ears.hears(&audio, words);
    }
}

async fn transcripts(db: &TestDb, tenant: TenantId) -> Vec<(Option<String>, Option<String>)> {
    crate::raw_pool!(db, pool => sqlx::query_as::<_, (Option<String>, Option<String>)>(
        "SELECT transcript, transcript_error FROM inbound_messages WHERE tenant_id = $1 AND kind = 'audio' ORDER BY id")
        .bind(tenant.0)
        .fetch_all(&pool)
        .await
        .unwrap())
}

fn ids(m: &OutboundMessage) -> Vec<String> {
    match m {
        OutboundMessage::Buttons { buttons, .. } => buttons.iter().map(|b| b.id.clone()).collect(),
        OutboundMessage::List { sections, .. } => sections.iter().flat_map(|s| &s.rows).map(|r| r.id.clone()).collect(),
        _ => vec![],
    }
}

const COULD_NOT_HEAR: &str = "Não consegui ouvir seu áudio, pode escrever?";

contract!(a_booking_by_voice_through_the_guided_menu, |db| async move {
    let v = voice_app(db, &[], true).await;
    v.record("1908647269898587", "Oi, quero marcar um horário");
    let services = v.say(db, voice("wamid.v1", "1908647269898587")).await;
    let first = ids(&services[0]);
    assert!(first[0].starts_with("g:svc:"), "the transcript's keyword reaches its screen: {first:?}");
    let request = &v.ears.requests()[0];
    assert_eq!((request.model.as_deref(), request.language.as_deref()), (Some("whisper-1"), Some("pt")));
    assert_eq!(request.file_name.as_deref(), Some("voice.ogg"));
    assert_eq!(request.file, clip("1908647269898587"));

    let service = ids(&services[0]).into_iter().find(|id| id == &format!("g:svc:{}", v.s.corte)).unwrap();
    let pros = v.say(db, pick(CUSTOMER, "wamid.v3", &service)).await;
    let days = v.say(db, pick(CUSTOMER, "wamid.v4", &ids(&pros[0])[1])).await;
    let times = v.say(db, pick(CUSTOMER, "wamid.v5", &ids(&days[0])[0])).await;
    let confirm = v.say(db, pick(CUSTOMER, "wamid.v6", &ids(&times[0])[0])).await;
    v.say(db, button(CUSTOMER, "wamid.v7", &ids(&confirm[0])[0])).await;
    assert_eq!(db.store.count_active_appointments(v.s.tenant.id).await.unwrap(), 1);

    // "Meus horários", said: the keyword reaches its screen.
    v.record("1908647269898588", "Meus horários");
    let mine = v.say(db, voice("wamid.v8", "1908647269898588")).await;
    assert!(mine[0].body().contains("Corte masculino"), "{}", mine[0].body());
    assert_eq!(
        transcripts(db, v.s.tenant.id).await,
        [(Some("Oi, quero marcar um horário".to_owned()), None), (Some("Meus horários".to_owned()), None)]
    );
    assert_eq!(v.graph.media_gets(), ["1908647269898587", "1908647269898588"]);

    // The console shows the transcript under the voice note.
    let id = conversation_of(db, v.s.tenant.id, CUSTOMER).await;
    let console = Console::login_new(db, &v.app.url, "dono@barbearia.com", &v.s.tenant.slug).await;
    let page = console.get(&format!("/admin/{}/conversations/{id}", v.s.tenant.slug)).await;
    assert!(page.body.contains("Transcrição: Oi, quero marcar um horário"), "{}", page.body);
    assert!(page.body.contains("áudio"));
});

contract!(a_booking_by_voice_through_the_model_hears_once_under_a_retried_turn, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let model = [("AGENT", "anthropic"), ("ANTHROPIC_API_KEY", "sk-test"), ("ANTHROPIC_BASE_URL", fake.url.as_str())];
    let v = voice_app(db, &model, true).await;
    v.record("731675419373506", "Quero marcar um corte com o Zé");
    let book = |id: &str| {
        tool_use(&[(
            id,
            "create_booking",
            json!({ "service_id": v.s.corte, "professional_id": v.s.ze, "starts_at": at }),
        )])
    };
    let mut stuck = says("never delivered");
    stuck.delay = Duration::from_secs(30);
    fake.push(book("toolu_A"));
    fake.push(stuck);
    let body = envelope(PHONE_NUMBER_ID, CUSTOMER, vec![voice("wamid.vm1", "731675419373506")]);
    assert_eq!(v.app.post_webhook(&bytes(&body)).await.status(), 200);
    let start = Utc::now() + TimeDelta::seconds(60);
    let worker = v.app.worker.clone();
    let doomed = tokio::spawn(async move { worker.run_next_at(start).await });
    while fake.requests().len() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    doomed.abort(); // the worker dies before replying
    let said = fake.requests()[0].1["messages"][0]["content"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(said, "Quero marcar um corte com o Zé", "the model reads the transcript as typed");

    fake.push(book("toolu_B"));
    fake.push(says("Marcado!"));
    let later = start + TimeDelta::seconds(31);
    v.app.worker.maintain_at(later).await.unwrap();
    assert!(matches!(v.app.worker.run_next_at(later).await.unwrap(), balcao::jobs::RunOutcome::Completed(_)));
    assert_eq!(db.store.count_active_appointments(v.s.tenant.id).await.unwrap(), 1);
    assert_eq!(v.graph.media_gets().len(), 1, "looked up once");
    assert_eq!(v.graph.downloads().len(), 1, "downloaded once");
    assert_eq!(v.ears.requests().len(), 1, "transcribed once");
    let retried = fake.requests()[2].1["messages"][0]["content"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(retried, said, "the retry reads the kept transcript");
});

contract!(a_20_mb_audio_is_refused_politely_and_never_downloaded, |db| async move {
    let v = voice_app(db, &[], true).await;
    v.graph.add_media("20000000", "audio/ogg; codecs=opus", &clip("big"), Some(20 * 1024 * 1024));
    let answers = v.say(db, voice("wamid.big", "20000000")).await;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].body(), COULD_NOT_HEAR);
    assert!(v.graph.downloads().is_empty(), "refused on its announced size");
    assert!(v.ears.requests().is_empty());
    let kept = transcripts(db, v.s.tenant.id).await;
    assert!(kept[0].1.as_deref().is_some_and(|e| e.starts_with("too_large")), "{kept:?}");
    // A video sent as audio is not transcribed either.
    v.graph.add_media("20000001", "video/mp4", &clip("video"), None);
    assert_eq!(v.say(db, voice("wamid.video", "20000001")).await[0].body(), COULD_NOT_HEAR);
    // A file that says it is small and is not: cut off on its length, never transcribed.
    let big = vec![0u8; 17 * 1024 * 1024];
    v.graph.add_media("20000002", "audio/ogg; codecs=opus", &big, Some(1000));
    assert_eq!(v.say(db, voice("wamid.liar", "20000002")).await[0].body(), COULD_NOT_HEAR);
    // From WhatsApp, the simulator's media id is not a media id: nothing is read for it.
    let gets = v.graph.media_gets().len();
    let fake = voice("wamid.sim", balcao::simulator::payload::VOICE_NOTE_MEDIA_ID);
    assert_eq!(v.say(db, fake).await[0].body(), COULD_NOT_HEAR);
    assert_eq!(v.graph.media_gets().len(), gets);
    assert!(v.ears.requests().is_empty());
    let kept = transcripts(db, v.s.tenant.id).await;
    assert!(kept[2].1.as_deref().is_some_and(|e| e.starts_with("too_large")), "{kept:?}");

    // Beside a text, the guided answer reads the text and says the audio was not heard.
    let text = crate::support::payloads::text("wamid.both", CUSTOMER, "oi");
    let body = envelope(PHONE_NUMBER_ID, CUSTOMER, vec![voice("wamid.both.v", "20000000"), text]);
    assert_eq!(v.app.post_webhook(&bytes(&body)).await.status(), 200);
    v.app.drain_turns().await;
    let last = inbox(db, v.s.tenant.id, CUSTOMER).await.pop().unwrap();
    assert!(last.body().starts_with(COULD_NOT_HEAR) && ids(&last) == ["g:book", "g:mine"], "{last:?}");
});

contract!(a_voice_note_during_a_handoff_gets_no_bot_answer, |db| async move {
    let v = voice_app(db, &[], true).await;
    v.record("4242", "tem horário amanhã?");
    v.say(db, crate::support::payloads::text("wamid.h0", CUSTOMER, "oi")).await;
    let id = conversation_of(db, v.s.tenant.id, CUSTOMER).await;
    let until = Utc::now() + TimeDelta::minutes(30);
    balcao::store::HandoffStore::take_over(&db.store, v.s.tenant.id, balcao::domain::ConversationId(id), until)
        .await
        .unwrap();
    assert!(v.say(db, voice("wamid.h1", "4242")).await.is_empty(), "heard, and left to the person");
    assert!(v.say(db, voice("wamid.h2", "99999")).await.is_empty(), "not heard, and still quiet");
    let kept = transcripts(db, v.s.tenant.id).await;
    assert_eq!(kept[0].0.as_deref(), Some("tem horário amanhã?"), "the person reads it in the console");
});

contract!(a_transcriber_outage_is_waited_out_and_the_note_heard_once, |db| async move {
    let v = voice_app(db, &[("BALCAO_JOB_MAX_ATTEMPTS", "3"), ("BALCAO_JOB_BACKOFF_BASE_MS", "1")], true).await;
    let attempts = balcao::transcription::ATTEMPTS as usize;
    v.record("554", "meus horários");
    // Down for the whole of the turn's first attempt: nothing is kept, the turn is retried, and
    // the second attempt hears it.
    v.ears.script(vec![Reply::Error(503); attempts]);
    let answers = v.say(db, voice("wamid.outage", "554")).await;
    assert!(answers.iter().all(|m| m.body() != COULD_NOT_HEAR), "{answers:?}");
    assert!(answers[0].body().contains("não tem horários"), "{}", answers[0].body());
    assert_eq!(v.ears.requests().len(), attempts + 1, "heard on the retry, once");
    assert_eq!(transcripts(db, v.s.tenant.id).await.pop(), Some((Some("meus horários".to_owned()), None)));
    // Meta's media download down for a while: the same.
    v.record("558", "meus horários");
    v.graph.fail_media_gets(balcao::whatsapp::media::ATTEMPTS as usize, 503);
    let answers = v.say(db, voice("wamid.media-outage", "558")).await;
    assert!(answers[0].body().contains("não tem horários"), "{}", answers[0].body());
    assert_eq!(transcripts(db, v.s.tenant.id).await.pop(), Some((Some("meus horários".to_owned()), None)));
});

contract!(a_transcription_timeout_is_answered_once, |db| async move {
    let v = voice_app(db, &[("BALCAO_JOB_MAX_ATTEMPTS", "2"), ("BALCAO_JOB_BACKOFF_BASE_MS", "1")], true).await;
    v.record("555", "alô");
    // Down through the turn's last attempt: kept as unheard, and the customer is asked to write.
    let attempts = balcao::transcription::ATTEMPTS as usize;
    v.ears.script(vec![Reply::Delay(Duration::from_secs(5)); 2 * attempts]);
    let answers = v.say(db, voice("wamid.slow", "555")).await;
    assert_eq!(answers.iter().map(|m| m.body()).collect::<Vec<_>>(), [COULD_NOT_HEAR]);
    assert_eq!(v.ears.requests().len(), 2 * attempts, "tried on each attempt, then given up");
    // Redelivered, it is a duplicate: no second apology, no second try.
    assert!(v.say(db, voice("wamid.slow", "555")).await.is_empty());
    assert_eq!(v.ears.requests().len(), 2 * attempts);
    // A 5xx is tried again and can succeed.
    v.record("556", "meus horários");
    v.ears.script(vec![Reply::Error(503)]);
    let answers = v.say(db, voice("wamid.flaky", "556")).await;
    assert!(answers[0].body().contains("não tem horários"), "{}", answers[0].body());

    // Deleted before its turn ran: never sent for transcription, never answered.
    v.record("557", "esquece");
    let heard = v.ears.requests().len();
    let revoke = json!({ "from": CUSTOMER, "id": "wamid.gone", "timestamp": now(), "type": "revoke",
                         "revoke": { "original_message_id": "wamid.deleted" } });
    let body = envelope(PHONE_NUMBER_ID, CUSTOMER, vec![voice("wamid.deleted", "557"), revoke]);
    assert_eq!(v.app.post_webhook(&bytes(&body)).await.status(), 200);
    let before = inbox(db, v.s.tenant.id, CUSTOMER).await.len();
    v.app.drain_turns().await;
    assert_eq!(inbox(db, v.s.tenant.id, CUSTOMER).await.len(), before);
    assert_eq!(v.ears.requests().len(), heard);
    assert_eq!(transcripts(db, v.s.tenant.id).await.pop(), Some((None, Some("revoked".to_owned()))));
});

contract!(without_an_endpoint_the_guided_agent_asks_for_text, |db| async move {
    let v = voice_app(db, &[], false).await;
    v.record("777", "oi");
    let answers = v.say(db, voice("wamid.noear", "777")).await;
    assert_eq!(
        answers.iter().map(|m| m.body()).collect::<Vec<_>>(),
        ["Ainda não consigo ouvir áudios por aqui. Pode escrever o que precisa?"]
    );
    assert!(v.graph.media_gets().is_empty(), "nothing is downloaded for nothing");
});

contract!(the_transcript_is_exported_and_erased_with_the_contact, |db| async move {
    let v = voice_app(db, &[], true).await;
    v.record("888", "meu nome é Ana Souza, quero cortar");
    v.say(db, voice("wamid.ana", "888")).await;
    let conversation = db
        .store
        .resolve_conversation(
            v.s.tenant.id,
            &balcao::whatsapp::ContactIdentity::phone(balcao::domain::PhoneE164::parse(CUSTOMER).unwrap()),
        )
        .await
        .unwrap();
    let contact = match conversation {
        balcao::store::ConversationRef::Known(c) => {
            db.store.conversation_contact(v.s.tenant.id, c).await.unwrap().contact_id
        }
        other => panic!("the customer is known: {other:?}"),
    };
    let export = balcao::store::PrivacyStore::export_contact(&db.store, v.s.tenant.id, contact).await.unwrap().unwrap();
    assert_eq!(export.messages_in[0].transcript.as_deref(), Some("meu nome é Ana Souza, quero cortar"));
    let replier = crate::support::scenario::local_replier(db);
    assert!(
        balcao::privacy::erase(&db.store, &replier, &v.app.privacy_key, &v.s.tenant, contact, Utc::now())
            .await
            .unwrap()
    );
    let erased = transcripts(db, v.s.tenant.id).await;
    assert_eq!(erased, [(None, Some("erased".to_owned()))], "gone, and never heard again");
});
