//! What strangers can reach must not silence the bot: [`FLOOD`] console logins (no account
//! needed), each from an address of its own, are posted at once, and while they are answered
//! customers write: every webhook is answered and every turn runs, without waiting for the
//! strangers' password checks, on a store whose pool is as small as the server sizes it
//! (workers, senders, intake writers and two more). Both databases.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use balcao::jobs::RunOutcome;
use reqwest::StatusCode;

use crate::contract;
use crate::support::common::*;
use crate::support::console::{Console, PASSWORD};
use crate::support::payloads::{bytes, text_payload};
use crate::support::scenario::Scenario;

/// Logins posted at once, each from a source of its own behind the trusted proxy.
const FLOOD: usize = 200;
/// Customers who write meanwhile, one message each.
const CUSTOMERS: usize = 20;

contract!(a_login_flood_from_200_sources_never_starves_webhooks_or_turns, |db| async move {
    let s = Scenario::new(db).await;
    balcao::http::console::auth::add_admin(&db.store, "dono@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    // One worker, one sender, one intake writer: the pool the server would size for them.
    let settings = [
        ("BALCAO_TRUSTED_PROXY_HEADER", "X-Forwarded-For"),
        ("BALCAO_WORKERS", "1"),
        ("BALCAO_OUTBOX_SENDERS", "1"),
        ("BALCAO_INTAKE_WRITERS", "1"),
        ("BALCAO_DB_MAX_CONNECTIONS", "1"),
    ];
    let config = local_test_config("http://127.0.0.1:9", &settings);
    let store = db.reopen_with(config.pool_size()).await;
    let app = Arc::new(TestApp::spawn_on(store, config).await);
    // One CSRF cookie and token serve every login: the form's token is the cookie's HMAC.
    let form = Console::new(&app.url);
    form.get("/admin/login").await;
    let (cookie, token) = (form.cookie_header(), form.csrf.lock().unwrap().clone().unwrap());
    // How many logins had their password checked (a 401), as they are answered.
    let checked = Arc::new(AtomicUsize::new(0));
    let logins: Vec<_> = (0..FLOOD)
        .map(|i| {
            let (url, cookie, token, checked) = (app.url.clone(), cookie.clone(), token.clone(), checked.clone());
            tokio::spawn(async move {
                let guess = format!("palpite-{i:04}");
                let fields = [("authenticity_token", token.as_str()), ("email", "dono@b.com"), ("password", &guess)];
                let status = reqwest::Client::new()
                    .post(format!("{url}/admin/login"))
                    .header("cookie", cookie)
                    .header("x-forwarded-for", format!("203.0.{}.{}", i / 250, i % 250 + 1))
                    .form(&fields)
                    .send()
                    .await
                    .map(|r| r.status());
                if matches!(status, Ok(StatusCode::UNAUTHORIZED)) {
                    checked.fetch_add(1, Ordering::Relaxed);
                }
                status
            })
        })
        .collect();
    // The flood is under way: its first logins are being answered.
    while checked.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // Meanwhile customers write, and their turns run.
    for c in 0..CUSTOMERS {
        let from = format!("55119777{c:05}");
        let body = bytes(&text_payload(&format!("wamid.flood.{c}"), &from, "oi"));
        assert_eq!(app.post_webhook(&body).await.status(), StatusCode::OK, "customer {c}'s webhook");
    }
    let mut completed = 0;
    for outcome in app.drain_turns().await {
        assert!(matches!(outcome, RunOutcome::Completed(_)), "{outcome:?}");
        completed += 1;
    }
    assert_eq!(completed, CUSTOMERS);
    // The bot did not queue behind the strangers' password checks: most were still to come
    // when its work was done (waiting behind them, it would have seen nearly all answered).
    let checked_meanwhile = checked.load(Ordering::Relaxed);
    assert!(checked_meanwhile < FLOOD / 2, "{checked_meanwhile} logins were checked before the bot's work was done");
    // Every login got an answer: wrong (401), throttled (429) or turned away at once (503).
    for login in logins {
        let status = login.await.unwrap().expect("a login answered");
        assert!(
            [StatusCode::UNAUTHORIZED, StatusCode::TOO_MANY_REQUESTS, StatusCode::SERVICE_UNAVAILABLE]
                .contains(&status),
            "{status}"
        );
    }
    // And the owner gets in once it is over.
    let owner = Console::from_source(&app.url, "198.51.100.60");
    assert_eq!(owner.login("dono@b.com", PASSWORD).await.status, StatusCode::SEE_OTHER);
});
