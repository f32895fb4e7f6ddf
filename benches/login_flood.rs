//! What a flood of console logins costs the bot: webhooks answered per second and turns per
//! second through the whole pipeline (signed webhook → stored message → turn with a loopback
//! model → reply in the outbox), with nothing else going on, and while strangers post logins,
//! each from a new address with a wrong password for a real admin (so none is held back by a
//! per-source limit): 200 clients each posting once a second (200 logins a second), and 200
//! clients posting as fast as they are answered (an HTTP flood, most turned away at once). One
//! run, SQLite and PostgreSQL, on one machine: the flood's clients share its cores with the
//! server. The server's pool is the size it gives itself.
//!
//! `cargo bench --bench login_flood`; set `BALCAO_BENCH_POSTGRES_URL` to add PostgreSQL.

#[path = "common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use balcao::app::App;
use balcao::config::Config;
use balcao::domain::DatabaseUrl;
use balcao::store::{OutboxStore, Store, TenantStore};
use balcao::tenant::TenantSpec;
use futures::StreamExt;

const TURNS: usize = 300;
/// Logins in flight at once during the flood, each from an address of its own.
const FLOOD: usize = 200;
const PASSWORD: &str = "bench-password-123";

struct Round {
    webhooks_per_second: f64,
    turns_per_second: f64,
    logins: usize,
}

/// Posts TURNS messages from new customers and waits for every reply.
async fn round(
    http: &reqwest::Client,
    base: &str,
    store: &Store,
    tenant: balcao::domain::TenantId,
    phone: &str,
    n: usize,
) -> (f64, f64) {
    let started = Instant::now();
    let post = |i: usize| async move {
        let from = format!("55119{n}{i:07}");
        let signed = common::webhook(phone, &from, &format!("wamid.flood.{n}.{i}"), "quais serviços?");
        common::post(http, base, &signed).await;
    };
    futures::stream::iter((0..TURNS).map(post)).buffer_unordered(32).collect::<Vec<()>>().await;
    let posted = started.elapsed();
    loop {
        let done = store.list_outbound(tenant).await.expect("outbox").len();
        if done >= TURNS * (n + 1) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "stuck at {done} replies");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (TURNS as f64 / posted.as_secs_f64(), TURNS as f64 / started.elapsed().as_secs_f64())
}

/// Strangers' logins from FLOOD clients until `stop`, each waiting `pace` after an answer
/// before its next; how many were answered.
async fn flood(base: String, stop: Arc<AtomicBool>, pace: Option<Duration>) -> usize {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    // The CSRF cookie and its form token, as a browser gets them from the login page.
    let page = http.get(format!("{base}/admin/login")).send().await.expect("login page");
    let cookie = page
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_owned))
        .collect::<Vec<_>>()
        .join("; ");
    let html = page.text().await.expect("html");
    let token = html
        .split("name=\"authenticity_token\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("csrf token")
        .to_owned();
    let next = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..FLOOD {
        let (http, base, cookie, token, stop, next, answered) =
            (http.clone(), base.clone(), cookie.clone(), token.clone(), stop.clone(), next.clone(), answered.clone());
        tasks.spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let source = format!("10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255);
                let fields = [
                    ("authenticity_token", token.as_str()),
                    ("email", "dono@bench.com"),
                    ("password", "palpite-errado"),
                ];
                let sent = http
                    .post(format!("{base}/admin/login"))
                    .header("cookie", &cookie)
                    .header("x-forwarded-for", source)
                    .form(&fields)
                    .send()
                    .await;
                if sent.is_ok() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(pace) = pace {
                    tokio::time::sleep(pace).await;
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    answered.load(Ordering::Relaxed)
}

async fn run(name: &str, url: &str, model_url: &str) -> String {
    let vars: HashMap<String, String> = [
        ("DATABASE_URL", url),
        ("BALCAO_ADDR", "127.0.0.1:0"),
        ("WHATSAPP_APP_SECRET", common::SECRET),
        ("AGENT", "anthropic"),
        ("ANTHROPIC_API_KEY", "bench"),
        ("ANTHROPIC_BASE_URL", model_url),
        ("BALCAO_DEBOUNCE_MS", "0"),
        ("BALCAO_DEBOUNCE_MAX_MS", "0"),
        ("BALCAO_POLL_INTERVAL_MS", "5"),
        ("BALCAO_TRUSTED_PROXY_HEADER", "X-Forwarded-For"),
        ("RUST_LOG", "error"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = Config::from_vars(&vars).expect("config");
    let store = Store::connect(&DatabaseUrl::new(url), config.pool_size()).await.expect("connect");
    store.migrate().await.expect("migrate");
    let spec = TenantSpec::parse(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tenants/example.toml")).expect("example"),
    )
    .expect("spec");
    let tenant = store.apply_tenant(&spec, chrono::Utc::now()).await.expect("tenant").id();
    balcao::store::CatalogStore::apply_catalog(&store, tenant, &spec.catalog).await.expect("catalog");
    balcao::http::console::auth::add_admin(&store, "dono@bench.com", PASSWORD, &spec.slug).await.expect("admin");
    let app = App::build(config, store.clone()).await.expect("app");
    let base = format!("http://{}", app.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    // Warm-up, then the quiet round and the flooded one, each with customers of its own.
    round(&http, &base, &store, tenant, &spec.phone_number_id, 0).await;
    let (webhooks, turns) = round(&http, &base, &store, tenant, &spec.phone_number_id, 1).await;
    let quiet = Round { webhooks_per_second: webhooks, turns_per_second: turns, logins: 0 };

    let mut rounds = vec![("quiet", quiet)];
    for (what, pace, n) in
        [("200 logins a second", Some(Duration::from_secs(1)), 2), ("200 clients as fast as answered", None, 3)]
    {
        let stop_flood = Arc::new(AtomicBool::new(false));
        let flooding = tokio::spawn(flood(base.clone(), stop_flood.clone(), pace));
        // Let the flood fill the server's line of logins first.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (webhooks, turns) = round(&http, &base, &store, tenant, &spec.phone_number_id, n).await;
        stop_flood.store(true, Ordering::Relaxed);
        let logins = flooding.await.expect("flood");
        rounds.push((what, Round { webhooks_per_second: webhooks, turns_per_second: turns, logins }));
    }
    let _ = stop.send(());
    let _ = server.await;
    store.close().await;
    let mut out = String::new();
    for (what, r) in &rounds {
        out +=
            &format!("| {name} | {what} | {:.0} | {:.1} | {} |\n", r.webhooks_per_second, r.turns_per_second, r.logins);
    }
    let quiet = &rounds[0].1;
    for (what, r) in &rounds[1..] {
        println!(
            "ratio | webhooks answered per second while {what}, to without ({name}) | {:.2}× | answered, never failed |",
            r.webhooks_per_second / quiet.webhooks_per_second
        );
        println!(
            "ratio | turns per second while {what}, to without ({name}) | {:.2}× | run, never failed |",
            r.turns_per_second / quiet.turns_per_second
        );
    }
    out
}

#[tokio::main]
async fn main() {
    let model_url = common::fake_model().await;
    let mut table = String::from(
        "| backend | meanwhile | webhooks answered/s | turns/s | logins answered |\n|---|---|---|---|---|\n",
    );
    let dir = tempfile::tempdir().expect("dir");
    let url = format!("sqlite://{}/flood.db", dir.path().display());
    table += &run("SQLite", &url, &model_url).await;
    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        let db = "balcao_bench_login_flood";
        let url = common::fresh_database(&admin, &server, db).await;
        table += &run("PostgreSQL", &url, &model_url).await;
        common::drop_database(&admin, db).await;
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}");
}
