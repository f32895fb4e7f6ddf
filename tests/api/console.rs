//! The console's doors: login, sessions, CSRF, throttling, tenant scoping. Also the browser-less
//! client other console tests drive pages with ([`Console`]).

use reqwest::StatusCode;

use crate::contract;
use crate::support::common::*;
use crate::support::console::{Console, ConsoleApp, PASSWORD};

contract!(login_opens_the_console_and_logout_closes_it, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let console = Console::login_new(db, &s.app.url, "Dono@Barbearia.com", &s.tenant.slug).await;
    let home = console.get("/admin").await;
    assert_eq!(home.location.as_deref(), Some(format!("/admin/{}/agenda", s.tenant.slug).as_str()));

    let out = console.post("/admin/logout", &[]).await;
    assert_eq!(out.location.as_deref(), Some("/admin/login"));
    assert_eq!(console.get("/admin").await.location.as_deref(), Some("/admin/login"));
});

contract!(the_session_cookie_is_http_only_and_lax, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "a@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    let console = Console::new(&s.app.url);
    console.get("/admin/login").await;
    let token = console.csrf.lock().unwrap().clone().unwrap();
    let response = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/admin/login", s.app.url))
        .header("cookie", console.cookie_header())
        .form(&[("authenticity_token", token.as_str()), ("email", "a@b.com"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("balcao_session="))
        .expect("a session cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain http in tests: {cookie}");
});

contract!(a_form_without_its_csrf_token_is_refused, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "a@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    let console = Console::new(&s.app.url);
    console.get("/admin/login").await;
    let page = console.post_raw("/admin/login", &[("email", "a@b.com"), ("password", PASSWORD)]).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    let page = console
        .post_raw("/admin/login", &[("authenticity_token", "AAAA"), ("email", "a@b.com"), ("password", PASSWORD)])
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    // Logged in, logout without the token does nothing.
    assert_eq!(console.login("a@b.com", PASSWORD).await.status, StatusCode::SEE_OTHER);
    assert_eq!(console.post_raw("/admin/logout", &[]).await.status, StatusCode::FORBIDDEN);
    assert_eq!(console.get("/admin").await.status, StatusCode::SEE_OTHER);
    assert_ne!(console.get("/admin").await.location.as_deref(), Some("/admin/login"));
});

/// `n` failed logins of `email` from `source`, the latest a moment ago (a long history,
/// written directly: growing delays would make a test wait for it).
async fn failed(db: &TestDb, email: &str, source: &str, n: usize) {
    for i in 0..n {
        let at = chrono::Utc::now() - chrono::TimeDelta::seconds(i as i64);
        crate::raw_pool!(db, pool => sqlx::query("INSERT INTO login_failures (email, source, failed_at) VALUES ($1, $2, $3)")
            .bind(email).bind(source).bind(at).execute(&pool).await.map(|_| ()).unwrap());
    }
}

async fn failures(db: &TestDb) -> i64 {
    crate::raw_pool!(db, pool => sqlx::query_scalar("SELECT COUNT(*) FROM login_failures").fetch_one(&pool).await.unwrap())
}

contract!(a_failing_source_slows_itself_and_never_locks_the_owner_out, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "a@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    // A guesser has been at it for a while, from one address.
    failed(db, "a@b.com", "203.0.113.9", 40).await;
    // (Its requests also carry a first hop it wrote itself, which must not count as its source.)
    let guesser = Console::from_source(&s.app.url, "203.0.113.9");
    let before = failures(db).await;
    let refused = guesser.login("a@b.com", PASSWORD).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    // The page keeps the form and says how long to wait; the refusal is not counted.
    assert!(
        refused.body.contains("Espere 15 minutos") && refused.body.contains("name=\"password\""),
        "{}",
        refused.body
    );
    assert_eq!(failures(db).await, before);
    // The owner, from their own connection, gets in at once with the right password.
    let owner = Console::from_source(&s.app.url, "198.51.100.7");
    assert_eq!(owner.login("A@B.com", PASSWORD).await.status, StatusCode::SEE_OTHER);
});

contract!(an_email_spray_from_one_source_is_slowed, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "c@d.com", PASSWORD, &s.tenant.slug).await.unwrap();
    for n in 0..30 {
        failed(db, &format!("alvo{n}@b.com"), "203.0.113.20", 1).await;
    }
    let sprayer = Console::from_source(&s.app.url, "203.0.113.20");
    let page = sprayer.login("outro@b.com", "qualquer-coisa").await;
    assert_eq!(page.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(page.body.contains("Espere"), "{}", page.body);
    assert_eq!(sprayer.login("c@d.com", PASSWORD).await.status, StatusCode::TOO_MANY_REQUESTS);
    // A few typos from an address cost nothing.
    let typist = Console::from_source(&s.app.url, "198.51.100.8");
    for _ in 0..2 {
        assert_eq!(typist.login("c@d.com", "errada-errada").await.status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(typist.login("c@d.com", PASSWORD).await.status, StatusCode::SEE_OTHER);
});

contract!(parallel_guesses_cannot_slip_under_the_login_throttle, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "a@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    let guesses = (0..25).map(|i| {
        let url = s.app.url.clone();
        tokio::spawn(async move {
            let console = Console::from_source(&url, "203.0.113.30");
            console.login("a@b.com", &format!("palpite-{i:04}")).await.status
        })
    });
    let statuses: Vec<StatusCode> = futures::future::join_all(guesses).await.into_iter().map(Result::unwrap).collect();
    let checked = statuses.iter().filter(|s| **s == StatusCode::UNAUTHORIZED).count();
    let throttled = statuses.iter().filter(|s| **s == StatusCode::TOO_MANY_REQUESTS).count();
    // Three free failures, then a delay: only attempts a second or more apart are checked.
    assert!((3..10).contains(&checked) && checked + throttled == 25, "{statuses:?}");
    assert_eq!(failures(db).await, checked as i64, "a refused guess is not counted");
});

contract!(a_second_factor_is_asked_once_turned_on_and_each_code_works_once, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "a@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    let secret = balcao::http::console::auth::set_totp(&db.store, "A@B.com", true).await.unwrap().expect("on");
    let code = |at: chrono::DateTime<chrono::Utc>| secret.code_at(at.timestamp().div_euclid(30));
    let console = Console::from_source(&s.app.url, "198.51.100.9");
    assert_eq!(console.login("a@b.com", PASSWORD).await.status, StatusCode::UNAUTHORIZED);
    let wrong = if code(chrono::Utc::now()) == "000000" { "111111" } else { "000000" };
    assert_eq!(console.login_with_code("a@b.com", PASSWORD, wrong).await.status, StatusCode::UNAUTHORIZED);
    let now = code(chrono::Utc::now());
    let page = console.login_with_code("a@b.com", PASSWORD, &now).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    // The same code again, from another browser: spent.
    let again = Console::from_source(&s.app.url, "198.51.100.10");
    assert_eq!(again.login_with_code("a@b.com", PASSWORD, &now).await.status, StatusCode::UNAUTHORIZED);
    // Off: the password alone again.
    assert!(balcao::http::console::auth::set_totp(&db.store, "a@b.com", false).await.unwrap().is_none());
    let plain = Console::from_source(&s.app.url, "198.51.100.11");
    assert_eq!(plain.login("a@b.com", PASSWORD).await.status, StatusCode::SEE_OTHER);
    assert!(balcao::http::console::auth::set_totp(&db.store, "ninguem@b.com", true).await.is_err());
});

contract!(an_unknown_email_and_a_wrong_password_look_the_same, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "a@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    let console = Console::new(&s.app.url);
    let wrong = console.login("a@b.com", "errada-errada").await;
    let unknown = console.login("x@y.com", "errada-errada").await;
    assert_eq!(wrong.status, unknown.status);
    assert!(
        wrong.body.contains("E-mail, senha ou código incorretos")
            && unknown.body.contains("E-mail, senha ou código incorretos")
    );
});

contract!(another_tenants_console_is_not_found, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let other = db.tenant_with("999000111", "outra-loja", None).await;
    let console = Console::login_new(db, &s.app.url, "a@b.com", &s.tenant.slug).await;
    for section in ["agenda", "conversations", "charges", "actions", "failures", "catalog"] {
        let page = console.get(&format!("/admin/{}/{section}", other.slug)).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{section}");
        let page = console.get(&format!("/admin/{}/{section}", s.tenant.slug)).await;
        assert_eq!(page.status, StatusCode::OK, "{section}: {}", page.body);
    }
});

contract!(a_session_lives_in_the_database_so_every_server_knows_it, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let console = Console::login_new(db, &s.app.url, "a@b.com", &s.tenant.slug).await;
    // Another server on the same database knows the session (in-process, so it shares the pool).
    let other = TestApp::spawn(db, test_config("http://127.0.0.1:9", &[])).await;
    let console = console.moved_to(&other.url);
    let home = console.get("/admin").await;
    assert_eq!(home.status, StatusCode::SEE_OTHER, "{}", home.body);
    assert_eq!(home.location.as_deref(), Some(format!("/admin/{}/agenda", s.tenant.slug).as_str()));
    // A form rendered by the first server is accepted by the other (one CSRF salt per
    // deployment), and logging out there ends the session everywhere.
    assert_eq!(console.post("/admin/logout", &[]).await.status, StatusCode::SEE_OTHER);
    assert_eq!(console.get("/admin").await.location.as_deref(), Some("/admin/login"));
});

/// Every console page and form, as the router serves them.
const CONSOLE_GETS: &[&str] = &[
    "/admin",
    "/admin/{slug}/agenda",
    "/admin/{slug}/agenda?view=week",
    "/admin/{slug}/appointments/1",
    "/admin/{slug}/conversations",
    "/admin/{slug}/conversations/1",
    "/admin/{slug}/conversations/1/fragment",
    "/admin/{slug}/conversations/1/events",
    "/admin/{slug}/contacts/1",
    "/admin/{slug}/contacts/1/export",
    "/admin/{slug}/charges",
    "/admin/{slug}/actions",
    "/admin/{slug}/failures",
    "/admin/{slug}/catalog",
];
const CONSOLE_POSTS: &[&str] = &[
    "/admin/logout",
    "/admin/{slug}/appointments/1/cancel",
    "/admin/{slug}/appointments/1/move",
    "/admin/{slug}/conversations/1/handoff",
    "/admin/{slug}/conversations/1/release",
    "/admin/{slug}/conversations/1/reply",
    "/admin/{slug}/contacts/1/erase",
    "/admin/{slug}/jobs/1/retry",
];

contract!(every_console_route_without_a_session_goes_to_the_login, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let anonymous = Console::new(&s.app.url);
    anonymous.get("/admin/login").await; // a valid CSRF token, and no session
    for path in CONSOLE_GETS {
        let path = path.replace("{slug}", &s.tenant.slug);
        let page = anonymous.get(&path).await;
        assert_eq!(
            (page.status, page.location.as_deref()),
            (StatusCode::SEE_OTHER, Some("/admin/login")),
            "GET {path}"
        );
    }
    for path in CONSOLE_POSTS {
        let path = path.replace("{slug}", &s.tenant.slug);
        let page = anonymous.post(&path, &[("text", "oi")]).await;
        assert_eq!(
            (page.status, page.location.as_deref()),
            (StatusCode::SEE_OTHER, Some("/admin/login")),
            "POST {path}"
        );
    }
});

contract!(every_console_form_without_its_csrf_token_is_forbidden, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    let console = Console::login_new(db, &s.app.url, "a@b.com", &s.tenant.slug).await;
    for path in CONSOLE_POSTS {
        let path = path.replace("{slug}", &s.tenant.slug);
        let page = console.post_raw(&path, &[("text", "oi"), ("confirm", "sim")]).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "POST {path}: {}", page.body);
    }
});

contract!(wrong_codes_from_many_sources_are_throttled_per_admin_and_the_owner_told, |db| async move {
    use crate::support::clicks::inbox;
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "dono@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    let secret = balcao::http::console::auth::set_totp(&db.store, "dono@b.com", true).await.unwrap().expect("on");
    balcao::http::console::auth::set_admin_phone(&db.store, "dono@b.com", "+5511988887777", &s.tenant.slug)
        .await
        .unwrap();
    let right = || secret.code_at(chrono::Utc::now().timestamp().div_euclid(30));
    // A leaked password, and codes guessed from twenty IPv6 /64s, three each (under every
    // per-source limit): five wrong codes are free, then every code waits, whatever its source.
    let mut statuses = Vec::new();
    for block in 0..20 {
        let guesser = Console::from_source(&s.app.url, &format!("2001:db8:{block:x}::1"));
        for guess in 0..3 {
            let code = format!("{:06}", (block * 3 + guess) * 7919 % 1_000_000);
            let code = if code == right() { "000001".to_owned() } else { code };
            statuses.push(guesser.login_with_code("dono@b.com", PASSWORD, &code).await.status);
        }
    }
    // Every guess is answered as a wrong login (a different answer would confirm the password),
    // and only five codes were checked: the rest waited, unwritten.
    assert!(statuses.iter().all(|s| *s == StatusCode::UNAUTHORIZED), "{statuses:?}");
    let checked: i64 = crate::raw_pool!(db, pool => sqlx::query_scalar("SELECT COUNT(*) FROM totp_failures")
        .fetch_one(&pool).await.unwrap());
    assert_eq!(checked, 5);
    // The right code waits too, for now: only someone with the password is held back.
    let owner = Console::from_source(&s.app.url, "198.51.100.40");
    let page = owner.login_with_code("dono@b.com", PASSWORD, &right()).await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED, "{}", page.body);
    // A stranger without the password still gets the ordinary answer, and is not counted here.
    let stranger = Console::from_source(&s.app.url, "198.51.100.41");
    assert_eq!(
        stranger.login_with_code("dono@b.com", "palpite-errado", &right()).await.status,
        StatusCode::UNAUTHORIZED
    );
    // The owner was told once, on WhatsApp, at their staff number.
    let told: Vec<String> = inbox(db, s.tenant.id, "5511988887777").await.iter().map(|m| m.body().to_owned()).collect();
    assert_eq!(told.iter().filter(|t| t.contains("5 códigos errados do app autenticador")).count(), 1, "{told:?}");
    assert!(told[0].contains("dono@b.com"), "{told:?}");
});

contract!(after_wrong_codes_the_owner_is_warned_at_the_next_login, |db| async move {
    let s = ConsoleApp::spawn(db).await;
    balcao::http::console::auth::add_admin(&db.store, "dono@b.com", PASSWORD, &s.tenant.slug).await.unwrap();
    let secret = balcao::http::console::auth::set_totp(&db.store, "dono@b.com", true).await.unwrap().expect("on");
    let right = || secret.code_at(chrono::Utc::now().timestamp().div_euclid(30));
    let guesser = Console::from_source(&s.app.url, "203.0.113.77");
    for code in ["000000", "999999"] {
        let code = if code == right() { "123123" } else { code };
        assert_eq!(guesser.login_with_code("dono@b.com", PASSWORD, code).await.status, StatusCode::UNAUTHORIZED);
    }
    let owner = Console::from_source(&s.app.url, "198.51.100.42");
    let page = owner.login_with_code("dono@b.com", PASSWORD, &right()).await;
    assert_eq!(page.location.as_deref(), Some("/admin/aviso"), "{}", page.body);
    let notice = owner.get("/admin/aviso").await;
    assert!(
        notice.body.contains("2 códigos errados do app autenticador foram digitados com a sua senha"),
        "{}",
        notice.body
    );
    // Shown once; the next login has nothing to tell.
    assert_eq!(owner.get("/admin/aviso").await.location.as_deref(), Some("/admin"));
    owner.post("/admin/logout", &[]).await;
    let later = Console::from_source(&s.app.url, "198.51.100.43");
    let step = chrono::Utc::now().timestamp().div_euclid(30) + 1;
    let page = later.login_with_code("dono@b.com", PASSWORD, &secret.code_at(step)).await;
    assert_eq!(page.location.as_deref(), Some("/admin"), "{}", page.body);
});

contract!(behind_a_proxy_on_a_dual_stack_bind_each_client_is_its_own_source, |db| async move {
    let tenant = db.tenant().await;
    let proxied = [("BALCAO_TRUSTED_PROXY_HEADER", "X-Forwarded-For"), ("BALCAO_ADDR", "[::]:0")];
    let app = TestApp::spawn(db, test_config("http://127.0.0.1:9", &proxied)).await;
    balcao::http::console::auth::add_admin(&db.store, "a@b.com", PASSWORD, &tenant.slug).await.unwrap();
    // The proxy reaches the server over IPv4 on a socket bound to `[::]`: its address arrives
    // as `::ffff:127.0.0.1`, a loopback peer all the same.
    for n in 0..10 {
        let someone = Console::from_source(&app.url, &format!("203.0.113.{}", 100 + n));
        assert_eq!(someone.login("a@b.com", "errada-errada").await.status, StatusCode::UNAUTHORIZED);
    }
    let owner = Console::from_source(&app.url, "198.51.100.50");
    assert_eq!(owner.login("a@b.com", PASSWORD).await.status, StatusCode::SEE_OTHER);
});
