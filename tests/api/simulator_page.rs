//! The web simulator without a browser: the page and its access rule, the send endpoint (a
//! signed webhook through the real intake), the event stream, the QR image.

use std::time::Duration;

use balcao::store::{ChargeStore, InboundStore, OutboxStore, TenantStore};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contract;
use crate::support::common::{TestApp, TestDb, local_test_config, sandbox_test_config, test_config};
use crate::support::console::Console;
use crate::support::scenario::{STAFF, Scenario};

const CUSTOMER: &str = "+5511999990001";
const MESSAGES: &str = "/simulator/api/tenants/barbearia/messages";

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

async fn send(app: &TestApp, body: Value) -> reqwest::Response {
    app.http.post(format!("{}{MESSAGES}", app.url)).json(&body).send().await.unwrap()
}

async fn local_app(db: &TestDb) -> TestApp {
    TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await
}

contract!(the_page_renders_in_local_mode, |db| async move {
    Scenario::with_merchant(db).await;
    let app = local_app(db).await;
    let page = app.get("/simulator").await;
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    for needle in ["id=\"tenant\"", "value=\"barbearia\"", &format!("data-staff=\"+{STAFF}\""), "id=\"send\""] {
        assert!(html.contains(needle), "{needle} missing in {html}");
    }
    assert!(html.contains("Abrir conversa"), "pt-BR text: {html}");
    let script = app.get("/simulator/assets/simulator.js").await;
    assert_eq!(script.headers()["content-type"], "text/javascript; charset=utf-8");
    let script = script.text().await.unwrap();
    // Data is drawn as text: the script never parses strings as HTML.
    assert!(script.contains("textContent") && !script.contains("innerHTML"), "the script writes HTML");
    assert_eq!(app.get("/simulator/assets/simulator.css").await.status(), 200);
    assert_eq!(app.get("/simulator/assets/other.js").await.status(), 404);
});

contract!(a_tenant_name_is_escaped_on_the_page, |db| async move {
    let file =
        crate::support::scenario::merchant_file().replacen("Barbearia do Zé", "Zé <script>alert(1)</script> & Cia", 1);
    Scenario::from_file(db, &file).await;
    let app = local_app(db).await;
    let html = app.get("/simulator").await.text().await.unwrap();
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(html.contains("alert(1)") && !html.contains("</script> &"), "{html}");
});

contract!(outside_local_mode_the_simulator_is_closed_without_a_login, |db| async move {
    Scenario::with_merchant(db).await;
    let live = TestApp::spawn(db, test_config("http://127.0.0.1:9", &[])).await;
    let page = no_redirects().get(format!("{}/simulator", live.url)).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    assert_eq!(page.headers()["location"], "/admin/login");
    let body = json!({ "from": CUSTOMER, "text": "oi" });
    assert_eq!(send(&live, body.clone()).await.status(), StatusCode::FORBIDDEN);
    let events = "/simulator/api/tenants/barbearia/events?wa_id=%2B5511999990001";
    assert_eq!(live.get(events).await.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        db.store.count_inbound(db.store.tenant_by_slug("barbearia").await.unwrap().unwrap().id).await.unwrap(),
        0
    );

    let with_token =
        TestApp::spawn(db, sandbox_test_config("http://127.0.0.1:9", &[("BALCAO_ADMIN_TOKEN", "let-me-in")])).await;
    assert_eq!(send(&with_token, body.clone()).await.status(), StatusCode::UNAUTHORIZED);
    let ok = with_token
        .http
        .post(format!("{}{MESSAGES}", with_token.url))
        .bearer_auth("let-me-in")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
});

contract!(a_console_admin_sees_only_their_tenants, |db| async move {
    Scenario::with_merchant(db).await;
    db.tenant_with("999000111", "outra", None).await;
    let live = TestApp::spawn(db, sandbox_test_config("http://127.0.0.1:9", &[])).await;
    let console = Console::login_new(db, &live.url, "dono@barbearia.com", "barbearia").await;
    let page = console.get("/simulator").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("value=\"barbearia\""), "{}", page.body);
    assert!(!page.body.contains("value=\"outra\""), "another tenant is offered: {}", page.body);
    let outbox = "/outbox?wa_id=%2B5511999990001";
    assert_eq!(console.get(&format!("/simulator/api/tenants/barbearia{outbox}")).await.status, StatusCode::OK);
    assert_eq!(console.get(&format!("/simulator/api/tenants/outra{outbox}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(console.get(&format!("/simulator/api/tenants/nenhuma{outbox}")).await.status, StatusCode::NOT_FOUND);
});

contract!(a_sent_message_is_stored_like_a_webhook_and_answered, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = local_app(db).await;
    let body = json!({ "from": CUSTOMER, "name": "Ana", "text": "oi", "id": "wamid.sim.once" });
    for _ in 0..2 {
        let answer = send(&app, body.clone()).await;
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(answer.json::<Value>().await.unwrap()["id"], "wamid.sim.once");
    }
    assert_eq!(db.store.count_inbound(s.tenant.id).await.unwrap(), 1, "the same id twice is one message");
    app.drain_turns().await;
    let replies = db.store.outbound_for_wa_id(s.tenant.id, "5511999990001", 0).await.unwrap();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(replies[0].message.0.body().contains("Olá, Ana!"), "{:?}", replies[0].message.0);

    // A tap on the menu's "Agendar" comes back as WhatsApp's interactive reply.
    let tap = json!({ "from": CUSTOMER, "name": "Ana",
                      "reply": { "id": "g:book", "title": "Agendar", "kind": "button", "context": "wamid.local.1" } });
    let answer = send(&app, tap).await;
    assert_eq!(answer.status(), StatusCode::OK);
    let id = answer.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("wamid.sim."), "{id}");
    app.drain_turns().await;
    let replies = db.store.outbound_for_wa_id(s.tenant.id, "5511999990001", replies[0].id).await.unwrap();
    let services = &replies.last().expect("an answer to the tap").message.0;
    assert!(matches!(services, balcao::whatsapp::OutboundMessage::List { .. }), "{services:?}");

    for bad in [
        json!({ "from": "abc", "text": "oi" }),
        json!({ "from": CUSTOMER }),
        json!({ "from": CUSTOMER, "text": "  " }),
        json!({ "from": CUSTOMER, "text": "oi", "reply": { "id": "x", "title": "x", "kind": "button" } }),
    ] {
        assert_eq!(send(&app, bad.clone()).await.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    let other = app
        .http
        .post(format!("{}/simulator/api/tenants/nenhuma/messages", app.url))
        .json(&json!({ "from": CUSTOMER, "text": "oi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
});

/// Reads the event stream until an event whose data contains `needle` (or the time runs out).
async fn read_events(response: &mut reqwest::Response, needle: &str) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !seen.contains(needle) {
        match tokio::time::timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            other => panic!("the stream ended or stalled ({other:?}) after: {seen}"),
        }
    }
    seen
}

contract!(the_event_stream_yields_the_replies, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = local_app(db).await;
    assert_eq!(send(&app, json!({ "from": CUSTOMER, "name": "Ana", "text": "oi" })).await.status(), StatusCode::OK);
    app.drain_turns().await;
    let mut stream = app.get("/simulator/api/tenants/barbearia/events?wa_id=%2B5511999990001&after=0").await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let first = read_events(&mut stream, "Olá, Ana!").await;
    assert!(first.contains("event: message"), "{first}");
    assert!(first.contains("\"type\":\"buttons\"") && first.contains("g:book"), "{first}");

    // A reply queued after the stream opened arrives on it.
    let before = db.store.outbound_for_wa_id(s.tenant.id, "5511999990001", 0).await.unwrap().len();
    let tap = json!({ "from": CUSTOMER, "reply": { "id": "g:book", "title": "Agendar", "kind": "button" } });
    assert_eq!(send(&app, tap).await.status(), StatusCode::OK);
    app.drain_turns().await;
    assert!(db.store.outbound_for_wa_id(s.tenant.id, "5511999990001", 0).await.unwrap().len() > before);
    let next = read_events(&mut stream, "Corte masculino").await;
    assert!(next.contains("\"type\":\"list\""), "{next}");
    drop(stream);

    // Resuming after the last event replays nothing before it.
    let rows = db.store.outbound_for_wa_id(s.tenant.id, "5511999990001", 0).await.unwrap();
    let last = rows.last().unwrap().id;
    let mut resumed = app
        .http
        .get(format!("{}/simulator/api/tenants/barbearia/events?wa_id=%2B5511999990001", app.url))
        .header("last-event-id", (last - 1).to_string())
        .send()
        .await
        .unwrap();
    let replayed = read_events(&mut resumed, "Corte masculino").await;
    assert!(!replayed.contains("Olá, Ana!"), "{replayed}");
});

contract!(the_qr_image_is_drawn_only_for_a_pix_code, |db| async move {
    Scenario::with_merchant(db).await;
    let app = local_app(db).await;
    let code = "00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***63041D3D";
    let qr = |code: &str| {
        reqwest::Url::parse_with_params(&format!("{}/simulator/api/tenants/barbearia/qr", app.url), [("code", code)])
            .unwrap()
    };
    let png = app.http.get(qr(code)).send().await.unwrap();
    assert_eq!(png.status(), StatusCode::OK);
    assert_eq!(png.headers()["content-type"], "image/png");
    assert_eq!(&png.bytes().await.unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    let forged = app.http.get(qr("https://example.com/phish")).send().await.unwrap();
    assert_eq!(forged.status(), StatusCode::BAD_REQUEST);
});

// An open browser tab must not hold a shutdown: the stream ends when the server stops.
contract!(the_event_stream_ends_when_the_server_stops, |db| async move {
    Scenario::with_merchant(db).await;
    let app = balcao::app::App::build(local_test_config("http://127.0.0.1:9", &[]), db.store.clone()).await.unwrap();
    let url = format!("http://{}", app.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let mut stream = reqwest::Client::new()
        .get(format!("{url}/simulator/api/tenants/barbearia/events?wa_id=%2B5511999990001"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    stop.send(()).unwrap();
    // A guard against a hang, not a measure: shutdown waits on open responses.
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(_)) = stream.chunk().await {}
        server.await
    })
    .await;
    ended.expect("the server waited on the event stream").unwrap().unwrap();
});

/// A console admin's simulator request: JSON, with the session cookie.
async fn post_as(app: &TestApp, console: &Console, body: Value) -> reqwest::Response {
    let url = format!("{}{MESSAGES}", app.url);
    app.http.post(url).header("cookie", console.cookie_header()).json(&body).send().await.unwrap()
}

contract!(the_simulator_refuses_a_live_tenant_and_records_an_admins_tap_as_the_admin, |db| async move {
    let s = Scenario::with_merchant(db).await;
    // Live: the server's access token sends for the tenant.
    let live = TestApp::spawn(db, test_config("http://127.0.0.1:9", &[])).await;
    let console = Console::login_new(db, &live.url, "ana@barbearia.com", "barbearia").await;
    let staff = format!("+{STAFF}");
    let refused = post_as(&live, &console, json!({ "from": staff, "text": "oi" })).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.unwrap().contains("lojas de teste"));
    assert_eq!(db.store.count_inbound(s.tenant.id).await.unwrap(), 0);
    let page = console.get("/simulator").await;
    assert!(!page.body.contains("value=\"barbearia\""), "a live tenant is offered: {}", page.body);

    // Sandboxed (no token, sandbox Pix): the admin plays the staff and confirms a charge.
    let app = TestApp::spawn(db, sandbox_test_config("http://127.0.0.1:9", &[])).await;
    let console = Console::new(&app.url);
    assert_eq!(
        console.login("ana@barbearia.com", crate::support::console::PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    // The customer wrote today (in the simulator too), so a charge may go to them.
    assert_eq!(post_as(&app, &console, json!({ "from": CUSTOMER, "text": "oi" })).await.status(), StatusCode::OK);
    let steps = [
        json!({ "text": "oi" }),
        json!({ "reply": { "id": "m:charge", "title": "Nova cobrança", "kind": "list" } }),
        json!({ "text": "50,00" }),
        json!({ "text": "11 99999-0001" }),
        json!({ "text": "Corte e barba" }),
    ];
    for mut step in steps {
        step["from"] = json!(staff);
        assert_eq!(post_as(&app, &console, step).await.status(), StatusCode::OK);
        app.drain_turns().await;
    }
    let offer = db.store.outbound_for_wa_id(s.tenant.id, STAFF, 0).await.unwrap();
    let yes =
        crate::support::clicks::last_buttons(&offer.into_iter().map(|r| r.message.0).collect::<Vec<_>>())[0].clone();
    let tap = json!({ "from": staff, "reply": { "id": yes, "title": "Confirmar", "kind": "button" } });
    assert_eq!(post_as(&app, &console, tap).await.status(), StatusCode::OK);
    app.drain_turns().await;
    type Decided = (String, Option<String>, Option<i64>, Option<String>);
    let decided: Decided = crate::raw_pool!(db, pool => sqlx::query_as(
        "SELECT status, confirmed_via, confirmed_by, decided_in_simulator FROM pending_actions WHERE kind = 'charge'")
        .fetch_one(&pool).await.unwrap());
    assert_eq!(decided, ("executed".into(), Some("simulator".into()), None, Some("ana@barbearia.com".into())));
    let charges =
        db.store.charges(s.tenant.id, None, chrono::Utc::now() - chrono::TimeDelta::days(1), 10).await.unwrap();
    assert_eq!(charges.len(), 1);
    let listed = console.get("/admin/barbearia/actions").await;
    assert!(listed.body.contains("via simulador, por ana@barbearia.com"), "{}", listed.body);
});

contract!(local_mode_opens_the_simulator_only_to_a_loopback_host, |db| async move {
    Scenario::with_merchant(db).await;
    let app = local_app(db).await;
    let path = format!("{}/simulator/api/tenants/barbearia", app.url);
    for (host, expected) in [
        ("localhost:8080", 200),
        ("127.0.0.1", 200),
        ("[::1]:8080", 200),
        ("balcao.example.com", 403),
        ("127.0.0.1.evil.example", 403),
        ("localhost.evil.example:8080", 403),
    ] {
        let answer = app.http.get(&path).header("host", host).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), expected, "{host}");
    }
    // A same-host proxy that rewrites Host to loopback still says it forwarded the request.
    for (header, value) in [("x-forwarded-for", "203.0.113.5"), ("via", "1.1 nginx"), ("forwarded", "for=203.0.113.5")]
    {
        let answer = app.http.get(&path).header(header, value).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), 403, "{header}");
    }
    // The page sends a rebinding visitor to the login, not to customers' conversations.
    let page =
        no_redirects().get(format!("{}/simulator", app.url)).header("host", "rebind.example").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
});

contract!(the_simulator_sends_its_voice_note_which_is_heard_without_meta, |db| async move {
    use crate::support::fake_transcription::FakeTranscription;
    let s = Scenario::with_merchant(db).await;
    let ears = FakeTranscription::start().await;
    ears.hears(balcao::simulator::payload::VOICE_NOTE, "meus horários");
    let vars = ears.vars();
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Local mode: no access token, nothing at Meta; the clip the repository ships is read.
    let app = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &vars)).await;
    let answer = send(&app, json!({ "from": CUSTOMER, "name": "Ana", "voice": true })).await;
    assert_eq!(answer.status(), StatusCode::OK);
    app.drain_turns().await;
    let replies = db.store.outbound_for_wa_id(s.tenant.id, "5511999990001", 0).await.unwrap();
    assert!(replies[0].message.0.body().contains("não tem horários"), "{:?}", replies[0].message.0);
    let request = &ears.requests()[0];
    assert_eq!(
        (request.file.as_slice(), request.file_name.as_deref()),
        (balcao::simulator::payload::VOICE_NOTE, Some("voice.mp3"))
    );
    // Voice with text is refused: one thing at a time.
    let both = send(&app, json!({ "from": CUSTOMER, "text": "oi", "voice": true })).await;
    assert_eq!(both.status(), StatusCode::BAD_REQUEST);
});

contract!(the_root_leads_to_the_simulator_locally_and_to_the_console_otherwise, |db| async move {
    Scenario::new(db).await;
    let local = local_app(db).await;
    let home = no_redirects().get(format!("{}/", local.url)).send().await.unwrap();
    assert_eq!(home.headers()["location"], "/simulator");
    let live = TestApp::spawn(db, test_config("http://127.0.0.1:9", &[])).await;
    let home = no_redirects().get(format!("{}/", live.url)).send().await.unwrap();
    assert_eq!(home.headers()["location"], "/admin");
});

contract!(a_reloaded_simulator_gets_what_its_phone_sent_back_in_place, |db| async move {
    let s = Scenario::with_merchant(db).await;
    let app = local_app(db).await;
    send(&app, json!({ "from": CUSTOMER, "name": "Ana", "text": "oi" })).await;
    app.drain_turns().await;
    let tap =
        json!({ "from": CUSTOMER, "name": "Ana", "reply": { "id": "g:book", "title": "Agendar", "kind": "button" } });
    send(&app, tap).await;
    app.drain_turns().await;
    let replies = db.store.outbound_for_wa_id(s.tenant.id, "5511999990001", 0).await.unwrap();
    let path = format!("{}/simulator/api/tenants/barbearia/sent?wa_id=%2B5511999990001", app.url);
    let sent: Value = app.http.get(path).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        sent["sent"],
        json!([{ "after": 0, "kind": "text", "text": "oi" },
               { "after": replies[0].id, "kind": "button_reply", "text": "Agendar" }])
    );
});
