//! `balcao chat` against a real running server: signed webhooks in, the outbox read back
//! through the simulator API, choices clicked by number.

use std::io::Cursor;

use balcao::app::App;
use balcao::config::LOCAL_DEV_APP_SECRET;
use balcao::domain::Secret;
use balcao::simulator::chat::{ChatSession, DEFAULT_NAME};
use tokio::sync::oneshot;

use crate::contract;
use crate::support::common::{TestApp, local_test_config, sandbox_test_config, test_config};
use crate::support::scenario::Scenario;

contract!(a_customer_chats_through_the_menu_from_the_terminal, |db| async move {
    let s = Scenario::with_merchant(db).await;
    // Local mode, as `cargo run` starts it: the simulator API is open on loopback.
    let config =
        local_test_config("http://127.0.0.1:9", &[("BALCAO_DEBOUNCE_MS", "0"), ("BALCAO_DEBOUNCE_MAX_MS", "0")]);
    let app = App::build(config, db.store.clone()).await.unwrap();
    let url = format!("http://{}", app.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let session = ChatSession {
        url,
        slug: "barbearia".into(),
        from: "+5511988880000".into(),
        name: "Ana".into(),
        secret: Secret::new(LOCAL_DEV_APP_SECRET),
        admin_token: None,
    };
    let mut out = Vec::new();
    session.run(Cursor::new("oi\n1\n1\n"), &mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("bot> Olá, Ana! Aqui é a Barbearia do Zé."), "{out}");
    assert!(out.contains("  1) Agendar") && out.contains("  2) Meus horários"), "{out}");
    assert!(out.contains("  1) Corte masculino — R$ 50,00"), "{out}");
    assert!(out.contains("Com quem você prefere fazer Corte masculino?"), "{out}");
    assert!(out.starts_with("Conversando com Barbearia do Zé como Ana (+5511988880000). Ctrl-D para sair.\nvocê> "));

    // A line that gets no answer says so and returns: a person has the conversation, and a
    // charge that does not exist.
    let conversation = crate::support::console::conversation_of(db, s.tenant.id, "5511988880000").await;
    let until = chrono::Utc::now() + chrono::TimeDelta::minutes(30);
    let id = balcao::domain::ConversationId(conversation);
    balcao::store::HandoffStore::take_over(&db.store, s.tenant.id, id, until).await.unwrap();
    let mut out = Vec::new();
    session.run(Cursor::new("alguém aí?\n/pago 99\n"), &mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("você> (sem resposta)\n"), "{out}");
    assert!(out.contains("[cobrança nº 99: não foi possível marcar como paga: não existe]"), "{out}");

    // The staff side is the business, with its own prompt.
    let staff = ChatSession { from: "+5511988887777".into(), name: DEFAULT_NAME.into(), ..session.clone() };
    let mut out = Vec::new();
    staff.run(Cursor::new(""), &mut out).await.unwrap();
    assert!(
        String::from_utf8(out).unwrap().starts_with("Conversando com Barbearia do Zé como equipe (+5511988887777)")
    );

    // A tenant that is not there: named, in Portuguese.
    let typo = ChatSession { slug: "barbeariaa".into(), ..session.clone() };
    let e = typo.run(Cursor::new("oi\n"), Vec::new()).await.unwrap_err();
    assert!(e.to_string().starts_with("não existe loja \"barbeariaa\""), "{e}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
});

const TENANT_PATH: &str = "/simulator/api/tenants/barbearia";
const OUTBOX_PATH: &str = "/simulator/api/tenants/barbearia/outbox?wa_id=%2B5511988880000";

async fn status(app: &TestApp, path: &str, bearer: Option<&str>) -> u16 {
    let mut request = app.http.get(format!("{}{path}", app.url));
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().status().as_u16()
}

contract!(the_simulator_api_is_closed_when_whatsapp_is_live, |db| async move {
    Scenario::new(db).await;
    let live = TestApp::spawn(db, test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(live.get(TENANT_PATH).await.status(), 403);
    let token = [("BALCAO_ADMIN_TOKEN", "let-me-in")];
    let admin = TestApp::spawn(db, test_config("http://127.0.0.1:9", &token)).await;
    assert_eq!(admin.get(TENANT_PATH).await.status(), 401);
    // Even to the admin token: the tenant is live (the server's token sends for it).
    assert_eq!(status(&admin, TENANT_PATH, Some("let-me-in")).await, 403);
    let admin = TestApp::spawn(db, sandbox_test_config("http://127.0.0.1:9", &token)).await;
    let ok = admin.http.get(format!("{}{TENANT_PATH}", admin.url)).bearer_auth("let-me-in").send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let body: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(body["phone_number_id"], crate::support::common::PHONE_NUMBER_ID);
    let bad = admin
        .http
        .get(format!("{}/simulator/api/tenants/barbearia/outbox?wa_id=not-a-phone", admin.url))
        .bearer_auth("let-me-in")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
});

// Production as many run it: a real App Secret, no global access token, each tenant sending
// with its own. The simulator API would show any customer's replies, so it stays closed.
contract!(the_simulator_api_is_closed_with_per_tenant_tokens, |db| async move {
    Scenario::new(db).await;
    db.tenant_with(crate::support::common::PHONE_NUMBER_ID, "barbearia", Some("EAAG-tenant-token")).await;
    let mut config = test_config("http://127.0.0.1:9", &[]);
    config.whatsapp.access_token = None;
    let closed = TestApp::spawn(db, config.clone()).await;
    for path in [TENANT_PATH, OUTBOX_PATH] {
        assert_eq!(status(&closed, path, None).await, 403, "{path}");
        assert_eq!(status(&closed, path, Some("guess")).await, 403, "{path}");
    }

    config.admin_token = Some(Secret::new("let-me-in"));
    let admin = TestApp::spawn(db, config).await;
    for path in [TENANT_PATH, OUTBOX_PATH] {
        assert_eq!(status(&admin, path, None).await, 401, "{path}");
        assert_eq!(status(&admin, path, Some("let-me-i")).await, 401, "{path}");
        // The right token still cannot act on a tenant that sends for real.
        assert_eq!(status(&admin, path, Some("let-me-in")).await, 403, "{path}");
    }
});

contract!(the_simulator_api_is_open_only_in_local_mode_on_loopback, |db| async move {
    Scenario::new(db).await;
    let local = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(status(&local, TENANT_PATH, None).await, 200);
    assert_eq!(status(&local, OUTBOX_PATH, None).await, 200);

    // Local mode opened to the network keeps its simulator for the admin token's bearer.
    let public = [("BALCAO_ADDR", "0.0.0.0:0"), ("BALCAO_LOCAL_MODE_PUBLIC", "1")];
    let exposed = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &public)).await;
    assert_eq!(status(&exposed, TENANT_PATH, None).await, 403);
    let with_admin = [public[0], public[1], ("BALCAO_ADMIN_TOKEN", "let-me-in")];
    let exposed = TestApp::spawn(db, local_test_config("http://127.0.0.1:9", &with_admin)).await;
    assert_eq!(status(&exposed, TENANT_PATH, None).await, 401);
    assert_eq!(status(&exposed, TENANT_PATH, Some("let-me-in")).await, 200);
});
