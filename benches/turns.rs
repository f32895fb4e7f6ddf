//! Turns per second through the whole pipeline: signed webhook → stored message → turn job →
//! agent turn with a zero-latency loopback model (one `list_services` call, then an answer) →
//! reply in the outbox. 1 and 4 workers, SQLite and PostgreSQL.
//!
//! Commits per turn come from the database's own count of write transactions over the run
//! (intake included), divided by the turns:
//! - PostgreSQL: the transaction id counter (`pg_current_xact_id()`) before and after. An id is
//!   assigned only to a transaction that writes, so read-only statements do not count (they do
//!   in `pg_stat_database.xact_commit`), and neither do statements that matched nothing (an idle
//!   claim). Each probe takes one id itself, subtracted. The counter is the cluster's: run the
//!   bench while nothing else writes to that server.
//! - SQLite: SQLite's commit hook on the store's single writer connection
//!   ([`Store::sqlite_commits`]), which SQLite calls for write transactions only, autocommitted
//!   statements included.
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
use serde_json::json;

const TURNS: usize = 400;
const SECRET: &str = "bench-secret";

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
        ("WHATSAPP_APP_SECRET", SECRET),
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
    let commits_before = commits(&store, url).await;
    let started = Instant::now();
    // One message from each of TURNS customers: TURNS independent turns.
    for i in 0..TURNS {
        let from = format!("55119{i:08}");
        let body = serde_json::to_vec(&json!({
            "object": "whatsapp_business_account",
            "entry": [{ "id": "1", "changes": [{ "field": "messages", "value": {
                "metadata": { "phone_number_id": spec.phone_number_id },
                "contacts": [{ "profile": { "name": "C" }, "wa_id": from }],
                "messages": [{ "from": from, "id": format!("wamid.turn.{i}"), "timestamp": "1", "type": "text", "text": { "body": "quais serviços?" } }]
            }}]}]
        }))
        .expect("json");
        let status = http
            .post(format!("{base}/webhooks/whatsapp"))
            .header("x-hub-signature-256", balcao::whatsapp::signature::sign(SECRET.as_bytes(), &body))
            .body(body)
            .send()
            .await
            .expect("post")
            .status();
        assert!(status.is_success());
    }
    loop {
        let done = store.list_outbound(tenant).await.expect("outbox").len();
        if done >= TURNS {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "stuck at {done} turns");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    // Count every commit of the turns: a turn may still be writing after its reply.
    while unfinished(url).await > 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The probe's own transaction id is not the turns' (PostgreSQL; SQLite's probe is free).
    let probe = if store.sqlite_commits().is_some() { 0 } else { 1 };
    let committed = commits(&store, url).await - commits_before - probe;
    let _ = stop.send(());
    let _ = server.await;
    format!(
        "| {name} | {workers} | {TURNS} | {:.1} | {:.1} | {:.2} |\n",
        TURNS as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1000.0 / TURNS as f64,
        committed as f64 / TURNS as f64
    )
}

/// Jobs not yet completed (read on a connection of its own, which commits nothing).
async fn unfinished(url: &str) -> i64 {
    const SQL: &str = "SELECT COUNT(*) FROM jobs WHERE state <> 'completed'";
    if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("sqlite");
        let n = sqlx::query_scalar(SQL).fetch_one(&pool).await.expect("jobs");
        pool.close().await;
        n
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("postgres");
        let n = sqlx::query_scalar(SQL).fetch_one(&pool).await.expect("jobs");
        pool.close().await;
        n
    }
}

/// The database's count of committed write transactions so far (see the module docs).
async fn commits(store: &Store, url: &str) -> u64 {
    if let Some(n) = store.sqlite_commits() {
        return n;
    }
    let pool = sqlx::PgPool::connect(url).await.expect("postgres");
    let xid: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text").fetch_one(&pool).await.expect("xid");
    pool.close().await;
    xid.parse().expect("a transaction id")
}

#[tokio::main]
async fn main() {
    let model_url = common::fake_model().await;
    let mut table = String::from(
        "| backend | workers | turns | turns/s | ms per turn (wall) | commits per turn |\n|---|---|---|---|---|---|\n",
    );
    let dir = tempfile::tempdir().expect("dir");
    for workers in [1, 4] {
        table +=
            &run("SQLite", &format!("sqlite://{}/turns-{workers}.db", dir.path().display()), workers, &model_url).await;
    }
    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        let base = server.rsplit_once('/').map(|(b, _)| b.to_owned()).expect("url with a database");
        for workers in [1, 4] {
            let db = format!("balcao_bench_turns_{workers}");
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}")))
                .execute(&admin)
                .await
                .expect("drop");
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&admin).await.expect("create");
            table += &run("PostgreSQL", &format!("{base}/{db}"), workers, &model_url).await;
        }
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}");
}
