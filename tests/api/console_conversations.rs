//! The console's conversation pages: the list, the timeline (messages, and each turn's folded
//! trace after the message it answered: model calls recorded with the turn, ledger keys and
//! replays), Portuguese states and WhatsApp's delivery marks, internal ids kept folded, tenant
//! scoping, escaping, live updates.

use std::collections::BTreeMap;

use balcao::domain::ConversationId;
use balcao::store::{BookingStore, ConversationViewStore, LedgerStore, OutboxStore};
use reqwest::StatusCode;
use serde_json::json;

use crate::contract;
use crate::support::agent::{agent_config, slot};
use crate::support::clicks::{button, pick, post};
use crate::support::common::{TestApp, test_config};
use crate::support::console::{Console, ConsoleApp, PASSWORD, conversation_of, field_value};
use crate::support::fake_model::{FakeModel, Reply, says};
use crate::support::payloads::{bytes, envelope, text, text_payload};
use crate::support::scenario::Scenario;
use balcao::whatsapp::OutboundMessage;

/// An Anthropic response with its own request id and token counts.
fn traced(request_id: &'static str, content: serde_json::Value, stop: &str, input: u64, output: u64) -> Reply {
    Reply {
        status: 200,
        headers: vec![("request-id", request_id)],
        body: json!({ "content": content, "stop_reason": stop, "usage": { "input_tokens": input, "output_tokens": output } }),
        delay: std::time::Duration::ZERO,
    }
}

/// What askama's HTML escaping makes of `s`.
fn escaped(s: &str) -> String {
    s.replace('&', "&#38;").replace('<', "&#60;").replace('>', "&#62;").replace('"', "&#34;").replace('\'', "&#39;")
}

/// The page without its folded blocks (`<details>…</details>`, never nested on this page).
fn unfolded(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(start) = rest.find("<details") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("</details>").map(|e| start + e + "</details>".len()).expect("a closed block");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where `needle` first appears in `body` (after `from`), or a failure naming it.
fn at(body: &str, needle: &str, from: usize) -> usize {
    body[from..].find(needle).map(|i| from + i).unwrap_or_else(|| panic!("{needle:?} missing after {from}: {body}"))
}

contract!(the_trace_shows_model_calls_and_a_tool_call_replayed_twice, |db| async move {
    let at = slot();
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    let book = |id: &str| {
        json!([{ "type": "tool_use", "id": id, "name": "create_booking",
                 "input": { "service_id": s.corte, "professional_id": s.ze, "starts_at": at } }])
    };
    // Turn 1: the model books, then asks for the same booking again (a replay), then answers.
    fake.push(traced("req_first_1", book("toolu_1"), "tool_use", 321, 45));
    fake.push(traced("req_first_2", book("toolu_2"), "tool_use", 400, 46));
    fake.push(traced("req_first_3", json!([{ "type": "text", "text": "Marcado!" }]), "end_turn", 500, 7));
    app.post_webhook(&bytes(&text_payload("wamid.t1", "5511999990001", "marca um corte"))).await;
    app.drain_turns().await;
    // Turn 2: the same booking asked once more.
    fake.push(traced("req_second_1", book("toolu_3"), "tool_use", 600, 8));
    fake.push(says("Já estava marcado."));
    app.post_webhook(&bytes(&text_payload("wamid.t2", "5511999990001", "marca de novo"))).await;
    app.drain_turns().await;

    let id = conversation_of(db, s.tenant.id, "5511999990001").await;
    let calls = db.store.model_calls_from(s.tenant.id, ConversationId(id), 0).await.unwrap();
    assert_eq!(calls.len(), 5, "{calls:?}");
    assert_eq!(calls[0].request_id.as_deref(), Some("req_first_1"));
    assert_eq!((calls[0].stop_reason.as_str(), calls[0].input_tokens, calls[0].output_tokens), ("tool_use", 321, 45));
    assert_eq!(calls[2].stop_reason, "end_turn");
    assert_eq!(calls.iter().map(|c| c.seq).collect::<Vec<_>>(), [0, 1, 2, 0, 1]);
    let ledger = db.store.executions_of_conversation(s.tenant.id, ConversationId(id)).await.unwrap();
    assert_eq!(ledger.len(), 1, "one booking, one ledger row");
    assert_eq!(ledger[0].replay_count, 2);

    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let page = console.get(&format!("/admin/{}/conversations/{id}", s.tenant.slug)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for expected in ["req_first_1", "req_first_3", "req_second_1", "tool_use", "end_turn", "321/45", "600/8"] {
        assert!(page.body.contains(expected), "{expected} missing");
    }
    assert!(page.body.contains(&escaped(&ledger[0].idempotency_key)), "the ledger key is shown");
    assert!(!unfolded(&page.body).contains(&escaped(&ledger[0].idempotency_key)), "but folded");
    assert!(page.body.contains("já feito</span> — repetido 2×, executado 1×"), "{}", page.body);
    assert!(page.body.contains("Marcado!") && page.body.contains("marca um corte"), "the transcript");
    // The fragment the page's script reloads has the same trace.
    let fragment = console.get(&format!("/admin/{}/conversations/{id}/fragment", s.tenant.slug)).await;
    assert!(fragment.body.contains("já feito</span> — repetido 2×, executado 1×") && !fragment.body.contains("<html"));

    let list = console.get(&format!("/admin/{}/conversations", s.tenant.slug)).await;
    assert!(list.body.contains(&format!("/conversations/{id}\"")), "{}", list.body);
});

contract!(another_tenants_conversation_is_not_found_and_a_stranger_is_sent_to_login, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let other = db.tenant_with("999000111", "outra-loja", None).await;
    s.app
        .post_webhook(&bytes(&envelope("999000111", "5511999990002", vec![text("wamid.o1", "5511999990002", "oi")])))
        .await;
    s.app.post_webhook(&bytes(&text_payload("wamid.m1", "5511999990003", "olá"))).await;
    let theirs = conversation_of(db, other.id, "5511999990002").await;
    let mine = conversation_of(db, s.tenant.id, "5511999990003").await;
    let console = Console::login_new(db, &s.app.url, "a@b.com", &s.tenant.slug).await;
    assert_eq!(console.get(&format!("/admin/{}/conversations/{mine}", s.tenant.slug)).await.status, StatusCode::OK);
    for path in ["", "/fragment", "/events"] {
        let page = console.get(&format!("/admin/{}/conversations/{theirs}{path}", s.tenant.slug)).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        let page = console.get(&format!("/admin/outra-loja/conversations/{theirs}{path}")).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
    }
    for action in ["handoff", "release"] {
        let page = console.post(&format!("/admin/{}/conversations/{theirs}/{action}", s.tenant.slug), &[]).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{action}");
    }
    let key = "0123456789abcdef0123456789abcdef";
    let page = console
        .post(&format!("/admin/{}/conversations/{theirs}/reply", s.tenant.slug), &[("text", "oi"), ("reply_key", key)])
        .await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(
        db.store.conversation_summary(other.id, ConversationId(theirs)).await.unwrap().unwrap().handoff_until.is_none()
    );

    let stranger = Console::new(&s.app.url);
    for path in ["/admin/barbearia/conversations".to_owned(), format!("/admin/barbearia/conversations/{mine}")] {
        let page = stranger.get(&path).await;
        assert_eq!(page.location.as_deref(), Some("/admin/login"), "{path}");
    }
});

contract!(html_in_a_message_and_a_name_is_escaped_on_both_pages, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let mut payload = text_payload("wamid.x1", "5511999990004", "<img src=x onerror=alert(1)>");
    payload["entry"][0]["changes"][0]["value"]["contacts"][0]["profile"]["name"] = json!("<b>Zé</b>");
    assert_eq!(s.app.post_webhook(&bytes(&payload)).await.status(), 200);
    let id = conversation_of(db, s.tenant.id, "5511999990004").await;
    let console = Console::login_new(db, &s.app.url, "a@b.com", &s.tenant.slug).await;
    let list = console.get(&format!("/admin/{}/conversations", s.tenant.slug)).await;
    let page = console.get(&format!("/admin/{}/conversations/{id}", s.tenant.slug)).await;
    for body in [&list.body, &page.body] {
        assert!(!body.contains("<b>") && body.contains(&escaped("<b>Zé</b>")), "{body}");
        assert!(!body.contains("<img"), "{body}");
    }
    assert!(page.body.contains(&escaped("<img src=x onerror=alert(1)>")), "{}", page.body);
});

/// Logs `email` in with a plain client and returns its cookie header (for a streaming request).
async fn cookies_after_login(base: &str, email: &str) -> String {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let mut jar: BTreeMap<String, String> = BTreeMap::new();
    let keep = |jar: &mut BTreeMap<String, String>, r: &reqwest::Response| {
        for v in r.headers().get_all("set-cookie") {
            let pair = v.to_str().unwrap().split(';').next().unwrap();
            let (k, v) = pair.split_once('=').unwrap();
            jar.insert(k.to_owned(), v.to_owned());
        }
    };
    let header =
        |jar: &BTreeMap<String, String>| jar.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ");
    let form = http.get(format!("{base}/admin/login")).send().await.unwrap();
    keep(&mut jar, &form);
    let token = field_value(&form.text().await.unwrap(), "authenticity_token").unwrap();
    let login = http
        .post(format!("{base}/admin/login"))
        .header("cookie", header(&jar))
        .form(&[("authenticity_token", token.as_str()), ("email", email), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    keep(&mut jar, &login);
    header(&jar)
}

contract!(the_events_stream_announces_a_new_message, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    s.app.post_webhook(&bytes(&text_payload("wamid.e1", "5511999990005", "oi"))).await;
    let id = conversation_of(db, s.tenant.id, "5511999990005").await;
    let console = Console::login_new(db, &s.app.url, "a@b.com", &s.tenant.slug).await;
    let page = console.get(&format!("/admin/{}/conversations/{id}", s.tenant.slug)).await;
    let at = page.body.find("data-version=\"").unwrap() + 14;
    let version = &page.body[at..at + page.body[at..].find('"').unwrap()];

    let cookie = cookies_after_login(&s.app.url, "a@b.com").await;
    let mut stream = reqwest::Client::new()
        .get(format!("{}/admin/{}/conversations/{id}/events?v={version}", s.app.url, s.tenant.slug))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert!(stream.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    s.app.post_webhook(&bytes(&text_payload("wamid.e2", "5511999990005", "chegou mais uma"))).await;
    let mut seen = String::new();
    let found = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("event: change") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "no change event: {seen:?}");
    assert!(!seen.contains(&format!("data: {version}\n")), "the event carries the new version");
});

contract!(the_timeline_folds_each_turns_trace_between_its_message_and_the_reply, |db| async move {
    let at_slot = slot();
    let fake = FakeModel::start(vec![]).await;
    let s = Scenario::new(db).await;
    let app = TestApp::spawn(db, agent_config(&fake, &[])).await;
    let customer = "5511999990006";
    fake.push(says("Olá! Em que posso ajudar?"));
    app.post_webhook(&bytes(&text_payload("wamid.l1", customer, "oi, bom dia"))).await;
    app.drain_turns().await;
    let book = json!([{ "type": "tool_use", "id": "toolu_9", "name": "create_booking",
                        "input": { "service_id": s.corte, "professional_id": s.ze, "starts_at": at_slot } }]);
    fake.push(traced("req_l_1", book, "tool_use", 10, 2));
    fake.push(says("Marcado para você!"));
    app.post_webhook(&bytes(&text_payload("wamid.l2", customer, "quero um corte"))).await;
    app.drain_turns().await;

    let id = conversation_of(db, s.tenant.id, customer).await;
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let page = console.get(&format!("/admin/{}/conversations/{id}", s.tenant.slug)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;

    // (a) One timeline, oldest first: each turn's folded trace after the message it answered
    // and before the bot's reply.
    let asked = at(body, "<div class=\"text\">oi, bom dia</div>", 0);
    let first_trace = at(body, "<details class=\"trace\"", asked);
    let greeted = at(body, "<div class=\"text\">Olá! Em que posso ajudar?</div>", asked);
    let wanted = at(body, "<div class=\"text\">quero um corte</div>", greeted);
    let second_trace = at(body, "<details class=\"trace\"", wanted);
    let booked = at(body, "<div class=\"text\">Marcado para você!</div>", wanted);
    assert!(first_trace < greeted && second_trace < booked, "{body}");
    assert!(!body[first_trace + 1..greeted].contains("<details class=\"trace\""), "one trace per turn: {body}");
    // The summary line says what happened, in Portuguese; the details unfold on a click.
    let summary = &body[second_trace..at(body, "</summary>", second_trace)];
    assert!(summary.contains("O bot respondeu · 1 ferramenta"), "{summary}");
    assert!(summary.contains(">concluído<"), "{summary}");
    for expected in ["req_l_1", "create_booking", "executado", "Turno ", "mensagem"] {
        assert!(body[second_trace..booked].contains(expected), "{expected} missing from the trace");
    }

    // (b) Portuguese states; a reply kept by local mode says "local", never "(não) enviada".
    for english in [">completed<", ">executed<", ">turn<", ">click<", ">succeeded<", ">pending<"] {
        assert!(!body.contains(english), "{english} shown: {body}");
    }
    assert!(!body.contains("Enviada") && !body.contains("não enviada"), "{body}");
    assert!(body.contains("title=\"modo local: não foi enviada ao WhatsApp\">local</span>"), "{body}");
    assert!(body.contains("Bot · <time") && body.contains("Cliente · <time"), "{body}");
    assert!(!unfolded(body).contains(">texto<") && !unfolded(body).contains("· texto"), "plain text has no kind");

    // (c) Internal ids only inside folded blocks.
    let rows = db.store.outbound_for_wa_id(s.tenant.id, customer, 0).await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.status == "local" && r.idempotency_key.starts_with("turn:")));
    let open = unfolded(body);
    for row in &rows {
        assert!(body.contains(&row.idempotency_key), "{} missing", row.idempotency_key);
        assert!(!open.contains(&row.idempotency_key), "{} outside a folded block", row.idempotency_key);
    }
    assert!(!open.contains("turn:"), "{open}");

    // The live fragment is the same timeline.
    let fragment = console.get(&format!("/admin/{}/conversations/{id}/fragment", s.tenant.slug)).await;
    assert!(fragment.body.contains("O bot respondeu · 1 ferramenta") && !unfolded(&fragment.body).contains("turn:"));
});

contract!(a_booking_confirmed_by_a_click_is_not_shown_as_undone_until_it_is_cancelled, |db| async move {
    let s = Scenario::new(db).await;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let app = TestApp::spawn(db, config).await;
    let customer = "5511999990007";
    let last_ids = || async {
        match db.store.outbound_for_wa_id(s.tenant.id, customer, 0).await.unwrap().last().map(|r| r.message.0.clone()) {
            Some(OutboundMessage::Buttons { buttons, .. }) => buttons.into_iter().map(|b| b.id).collect::<Vec<_>>(),
            Some(OutboundMessage::List { sections, .. }) => {
                sections.into_iter().flat_map(|s| s.rows).map(|r| r.id).collect()
            }
            other => panic!("expected choices, got {other:?}"),
        }
    };
    // The guided menu: a service, a professional, a day, a time; the time proposes the booking.
    post(&app, customer, text("wamid.b1", customer, "oi")).await;
    app.drain_turns().await;
    let steps = [
        ("wamid.b2", "g:book".to_owned(), true),
        ("wamid.b3", format!("g:svc:{}", s.corte), false),
        ("wamid.b4", format!("g:pro:{}:{}", s.corte, s.ze), false),
    ];
    for (wamid, choice, is_button) in steps {
        let message = if is_button { button(customer, wamid, &choice) } else { pick(customer, wamid, &choice) };
        post(&app, customer, message).await;
        app.drain_turns().await;
    }
    let day = last_ids().await[0].clone();
    post(&app, customer, pick(customer, "wamid.b5", &day)).await;
    app.drain_turns().await;
    let time = last_ids().await[0].clone();
    post(&app, customer, pick(customer, "wamid.b6", &time)).await;
    app.drain_turns().await;
    let confirm = last_ids().await[0].clone();
    assert!(confirm.starts_with("a:") && confirm.ends_with(":y"), "{confirm}");
    post(&app, customer, button(customer, "wamid.b7", &confirm)).await;
    app.drain_turns().await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 1);

    let id = conversation_of(db, s.tenant.id, customer).await;
    let console = Console::login_new(db, &app.url, "dono@barbearia.com", &s.tenant.slug).await;
    let path = format!("/admin/{}/conversations/{id}", s.tenant.slug);
    let page = console.get(&path).await;
    let body = &page.body;
    // (d) The proposal's ledger row was released by the answer: that undid nothing.
    assert!(!body.contains("desfeito depois"), "{body}");
    assert!(body.contains("proposta respondida") && body.contains("1 ação: agendamento feito"), "{body}");
    for english in [">executed<", ">click<", ">booking<", ">confirmed<"] {
        assert!(!body.contains(english), "{english} shown: {body}");
    }
    // The click's trace sits after the tapped button (its title) and before the confirmation.
    let tapped = at(body, "<div class=\"text\">Confirmar</div>", 0);
    let trace = at(body, "<details class=\"trace\"", tapped);
    let done = at(body, "<div class=\"text\">Pronto!", tapped);
    assert!(trace < done, "{body}");
    assert!(body[trace..done].contains("O bot respondeu ao toque") && body[trace..done].contains("toque em botão"));
    // (c) The tapped button's reply id and the outcome's outbox key stay folded.
    let open = unfolded(body);
    assert!(body.contains(&confirm) && !open.contains(&confirm), "{open}");
    assert!(body.contains(":outcome") && !open.contains(":outcome") && !open.contains("action:"), "{open}");

    // Cancelled afterwards: now the booking was undone, and the page says so.
    post(&app, customer, text("wamid.b8", customer, "Meus horários")).await;
    app.drain_turns().await;
    // The booking's row (`g:bk:<id>` or `g:cancel:<id>`): its Cancelar proposes the cancellation.
    let row = last_ids().await[0].clone();
    let booking = row.rsplit(':').next().unwrap_or_default();
    post(&app, customer, pick(customer, "wamid.b9", &format!("g:cancel:{booking}"))).await;
    app.drain_turns().await;
    let yes = last_ids().await[0].clone();
    assert!(yes.starts_with("a:") && yes.ends_with(":y"), "{row} then {yes}");
    post(&app, customer, button(customer, "wamid.b10", &yes)).await;
    app.drain_turns().await;
    assert_eq!(db.store.count_active_appointments(s.tenant.id).await.unwrap(), 0);
    let page = console.get(&path).await;
    assert_eq!(page.body.matches("desfeito depois").count(), 1, "{}", page.body);
});
