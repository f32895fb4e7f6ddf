//! `balcao chat` against a real running server: signed webhooks in, the outbox read back
//! through the simulator API, choices clicked by number.

use std::io::Cursor;

use balcao::app::App;
use balcao::chat::ChatSession;
use balcao::config::Secret;
use tokio::sync::oneshot;

use crate::common::{APP_SECRET, TestApp, test_config};
use crate::contract;
use crate::scenario::Scenario;

contract!(a_customer_chats_through_the_menu_from_the_terminal, |db| async move {
    Scenario::new(db).await;
    let mut config = test_config("http://127.0.0.1:9", &[("BALCAO_DEBOUNCE_MS", "0"), ("BALCAO_DEBOUNCE_MAX_MS", "0")]);
    config.whatsapp.access_token = None;
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
        secret: Secret::new(APP_SECRET),
        admin_token: None,
    };
    let mut out = Vec::new();
    session.run(Cursor::new("oi\n1\n1\n"), &mut out).await.unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("bot> Olá, Ana! Aqui é a Barbearia do Zé."), "{out}");
    assert!(out.contains("  1) Agendar") && out.contains("  2) Meus horários"), "{out}");
    assert!(out.contains("  1) Corte masculino — R$ 50,00"), "{out}");
    assert!(out.contains("Com quem você prefere fazer Corte masculino?"), "{out}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
});

contract!(the_simulator_api_is_closed_when_whatsapp_is_live, |db| async move {
    Scenario::new(db).await;
    let live = TestApp::spawn(db, test_config("http://127.0.0.1:9", &[])).await;
    assert_eq!(live.get("/simulator/api/tenants/barbearia").await.status(), 403);
    let admin = TestApp::spawn(db, test_config("http://127.0.0.1:9", &[("BALCAO_ADMIN_TOKEN", "let-me-in")])).await;
    assert_eq!(admin.get("/simulator/api/tenants/barbearia").await.status(), 401);
    let ok = admin
        .http
        .get(format!("{}/simulator/api/tenants/barbearia", admin.url))
        .bearer_auth("let-me-in")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let body: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(body["phone_number_id"], crate::common::PHONE_NUMBER_ID);
    let bad = admin
        .http
        .get(format!("{}/simulator/api/tenants/barbearia/outbox?wa_id=not-a-phone", admin.url))
        .bearer_auth("let-me-in")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
});
