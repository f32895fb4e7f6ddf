//! Turns per second through the whole pipeline: signed webhook → stored message → turn job →
//! agent turn with a zero-latency loopback model (one `list_services` call, then an answer) →
//! reply in the outbox. 1 and 8 workers (8 units of work at once: a turn's statements run on
//! one connection, `store::unit`), SQLite and PostgreSQL.
//!
//! Before the clock: one turn for every customer (the warm-up), then `ANALYZE`, so the timed
//! turns run on plans made with statistics, for customers the business knows.
//!
//! Commits per turn come from the database's own count of write transactions over the timed
//! run (intake included), divided by the turns (`common::commits`).
//!
//! `cargo bench --bench turns`; set `BALCAO_BENCH_POSTGRES_URL` to add PostgreSQL.

#[path = "common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use balcao::app::App;
use balcao::config::Config;
use balcao::domain::DatabaseUrl;
use balcao::store::{OutboxStore, Store, TenantStore};
use balcao::tenant::TenantSpec;
use futures::StreamExt;

const TURNS: usize = 400;

/// One run's table row.
async fn run(name: &str, url: &str, workers: usize, model_url: &str) -> String {
    let store = Store::connect(&DatabaseUrl::new(url), 16).await.expect("connect");
    store.migrate().await.expect("migrate");
    let spec = TenantSpec::parse(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tenants/example.toml")).expect("example"),
    )
    .expect("spec");
    let tenant = store.apply_tenant(&spec, chrono::Utc::now()).await.expect("tenant").id();
    balcao::store::CatalogStore::apply_catalog(&store, tenant, &spec.catalog).await.expect("catalog");
    let vars: HashMap<String, String> = [
        ("BALCAO_ADDR", "127.0.0.1:0"),
        ("WHATSAPP_APP_SECRET", common::SECRET),
        ("AGENT", "anthropic"),
        ("ANTHROPIC_API_KEY", "bench"),
        ("ANTHROPIC_BASE_URL", model_url),
        ("BALCAO_DEBOUNCE_MS", "0"),
        ("BALCAO_DEBOUNCE_MAX_MS", "0"),
        ("BALCAO_POLL_INTERVAL_MS", "5"),
        ("BALCAO_WORKERS", &workers.to_string()),
        ("RUST_LOG", "warn"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let config = Config::from_vars(&vars).expect("config");
    let app = App::build(config, store.clone()).await.expect("app");
    let base = format!("http://{}", app.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    let round = |round: usize| {
        let (http, base, phone_number_id, store) = (&http, &base, &spec.phone_number_id, &store);
        async move {
            let started = Instant::now();
            // One message from each of TURNS customers: TURNS independent turns, posted from
            // 32 connections so the intake keeps ahead of the workers.
            let post = |i: usize| async move {
                let from = format!("55119{i:08}");
                let signed =
                    common::webhook(phone_number_id, &from, &format!("wamid.turn.{round}.{i}"), "quais serviços?");
                common::post(http, base, &signed).await;
            };
            futures::stream::iter((0..TURNS).map(post)).buffer_unordered(32).collect::<Vec<()>>().await;
            loop {
                let done = store.list_outbound(tenant).await.expect("outbox").len();
                if done >= TURNS * (round + 1) {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(600), "stuck at {done} replies");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let elapsed = started.elapsed();
            // Every commit of the turns counts: a turn may still be writing after its reply.
            common::jobs_finished(url).await;
            elapsed
        }
    };
    round(0).await;
    common::analyze(url).await;
    let commits_before = common::commits(&store, url).await;
    let elapsed = round(1).await;
    // The probe's own transaction id is not the turns' (PostgreSQL; SQLite's probe is free).
    let probe = if store.sqlite_commits().is_some() { 0 } else { 1 };
    let committed = common::commits(&store, url).await - commits_before - probe;
    let _ = stop.send(());
    let _ = server.await;
    format!(
        "| {name} | {workers} | {TURNS} | {:.1} | {:.1} | {:.2} |\n",
        TURNS as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / TURNS as f64,
        committed as f64 / TURNS as f64
    )
}

#[tokio::main]
async fn main() {
    let model_url = common::fake_model().await;
    let mut table = String::from(
        "| backend | workers | turns | turns/s | ms per turn (wall) | commits per turn |\n|---|---|---|---|---|---|\n",
    );
    let dir = tempfile::tempdir().expect("dir");
    for workers in [1, 8] {
        let url = format!("sqlite://{}/turns-{workers}.db", dir.path().display());
        table += &run("SQLite", &url, workers, &model_url).await;
    }
    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        for workers in [1, 8] {
            let db = format!("balcao_bench_turns_{workers}");
            let url = common::fresh_database(&admin, &server, &db).await;
            table += &run("PostgreSQL", &url, workers, &model_url).await;
            common::drop_database(&admin, &db).await;
        }
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}");
}
