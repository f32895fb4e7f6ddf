//! Server memory at scale: RSS of the real `balcao` binary (a child process) with 1,000
//! tenants and 100,000 conversations (100 contacts per tenant) in the database.
//!
//! The tenants are applied as `balcao tenant apply` does (the example catalog, each with its
//! own `phone_number_id`, the default guided agent); contacts and conversations are seeded in
//! bulk SQL, then `ANALYZE`. The server's `VmRSS` is read idle; then every tenant gets one
//! message (1,000 tenant lookups, guided turns and replies), then 20,000 more messages go to
//! 20,000 distinct conversations from 32 connections; `VmHWM` is the peak, `VmRSS` is read again
//! after the turns drained and a pause. Targets: < 50 MB idle, < 150 MB under load.
//!
//! `cargo bench --bench memory` runs SQLite; set `BALCAO_BENCH_POSTGRES_URL` to add PostgreSQL
//! (the bench creates and drops the database `balcao_bench_memory_pg`).

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use balcao::domain::DatabaseUrl;
use balcao::store::{CatalogStore, Store, TenantStore};
use balcao::tenant::TenantSpec;
use common::Server;
use futures::StreamExt;

const TENANTS: usize = 1_000;
const CONTACTS_PER_TENANT: usize = 100;
const CONVERSATIONS: usize = TENANTS * CONTACTS_PER_TENANT;
const MESSAGES: usize = 20_000;
const CONNECTIONS: usize = 32;
/// How long the bench waits for the turns of a step to be answered.
const DRAIN_LIMIT: Duration = Duration::from_secs(240);

fn phone_number_id(tenant: usize) -> String {
    format!("2000000{tenant:05}")
}

fn customer(contact: usize) -> String {
    format!("55119{contact:08}")
}

/// The example tenant, renamed and renumbered as tenant `i`.
fn spec(example: &str, i: usize) -> TenantSpec {
    let text = example
        .replace("slug = \"barbearia-do-ze\"", &format!("slug = \"bench-{i:04}\""))
        .replace("106540352242922", &phone_number_id(i));
    TenantSpec::parse(&text).expect("spec")
}

/// Contacts `55119{0..100}` for every tenant, a conversation each. One statement per table;
/// only the row generator differs between the dialects.
const PG_CONTACTS: &str = "INSERT INTO contacts (tenant_id, external_key, wa_id, profile_name, created_at, updated_at)
     SELECT t.id, '55119' || lpad(n::text, 8, '0'), '55119' || lpad(n::text, 8, '0'), 'Cliente', $1, $1
     FROM tenants t CROSS JOIN generate_series(0, 99) AS n";
const SQLITE_CONTACTS: &str =
    "INSERT INTO contacts (tenant_id, external_key, wa_id, profile_name, created_at, updated_at)
     WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99)
     SELECT t.id, printf('55119%08d', n.i), printf('55119%08d', n.i), 'Cliente', $1, $1
     FROM tenants t CROSS JOIN n";
const CONVERSATIONS_SQL: &str =
    "INSERT INTO conversations (tenant_id, contact_id, created_at) SELECT tenant_id, id, $1 FROM contacts";

/// Seeds the database at `url`; returns the seconds it took.
async fn seed(url: &str) -> f64 {
    let started = Instant::now();
    let store = Store::connect(&DatabaseUrl::new(url), 8).await.expect("connect");
    store.migrate().await.expect("migrate");
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tenants/example.toml")).expect("example");
    let now = chrono::Utc::now();
    futures::stream::iter(0..TENANTS)
        .for_each_concurrent(8, |i| {
            let (store, spec) = (store.clone(), spec(&example, i));
            async move {
                let tenant = store.apply_tenant(&spec, now).await.expect("tenant").id();
                store.apply_catalog(tenant, &spec.catalog).await.expect("catalog");
            }
        })
        .await;
    store.close().await;
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.expect("pool");
        sqlx::query(PG_CONTACTS).bind(now).execute(&pool).await.expect("contacts");
        sqlx::query(CONVERSATIONS_SQL).bind(now).execute(&pool).await.expect("conversations");
        // What autovacuum does after a bulk load in production: plans need statistics.
        sqlx::query("ANALYZE").execute(&pool).await.expect("analyze");
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.expect("pool");
        sqlx::query(SQLITE_CONTACTS).bind(now).execute(&pool).await.expect("contacts");
        sqlx::query(CONVERSATIONS_SQL).bind(now).execute(&pool).await.expect("conversations");
        sqlx::query("ANALYZE").execute(&pool).await.expect("analyze");
        pool.close().await;
    }
    started.elapsed().as_secs_f64()
}

/// Conversations that have a reply: how many turns were answered so far.
async fn answered(url: &str) -> i64 {
    let sql = "SELECT count(DISTINCT conversation_id) FROM outbound_messages";
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.expect("pool");
        let n = sqlx::query_scalar(sql).fetch_one(&pool).await.expect("count");
        pool.close().await;
        n
    } else {
        let pool = sqlx::SqlitePool::connect(url).await.expect("pool");
        let n = sqlx::query_scalar(sql).fetch_one(&pool).await.expect("count");
        pool.close().await;
        n
    }
}

/// Waits until `target` conversations have a reply or [`DRAIN_LIMIT`] passes; returns the count.
async fn drain(url: &str, target: i64) -> i64 {
    let started = Instant::now();
    loop {
        let n = answered(url).await;
        if n >= target || started.elapsed() > DRAIN_LIMIT {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Sends the webhooks `bodies` to `server` from [`CONNECTIONS`] connections.
async fn send(server: &Server, bodies: Vec<(Vec<u8>, String)>) -> f64 {
    let client = reqwest::Client::builder().pool_max_idle_per_host(CONNECTIONS).build().expect("client");
    let (bodies, base) = (Arc::new(bodies), Arc::new(server.base.clone()));
    let stats = common::drive(bodies.len(), CONNECTIONS, None, move |i| {
        let (client, bodies, base) = (client.clone(), bodies.clone(), base.clone());
        async move { common::post(&client, &base, &bodies[i]).await }
    })
    .await;
    stats.throughput()
}

async fn run(name: &str, url: &str) -> String {
    let seeded = seed(url).await;
    let server =
        Server::start(url, &[("BALCAO_DEBOUNCE_MS", "0".into()), ("BALCAO_DEBOUNCE_MAX_MS", "0".into())]).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = common::status_mb(server.pid, "VmRSS:");

    // One message to every tenant, from its first contact: every tenant is looked up once.
    let first: Vec<_> = (0..TENANTS)
        .map(|t| common::webhook(&phone_number_id(t), &customer(0), &format!("wamid.t.{t}"), "oi"))
        .collect();
    send(&server, first).await;
    let after_tenants = drain(url, TENANTS as i64).await;
    let rss_tenants = common::status_mb(server.pid, "VmRSS:");

    // 20,000 distinct conversations, spread over all tenants: 7,919 is prime to 100,000, so
    // `i × 7,919 mod 100,000` never repeats; contact 0 of each tenant already wrote.
    let spread: Vec<_> = (0..MESSAGES)
        .map(|i| {
            let c = (i * 7_919) % CONVERSATIONS;
            let (tenant, contact) = (c / CONTACTS_PER_TENANT, c % CONTACTS_PER_TENANT);
            common::webhook(&phone_number_id(tenant), &customer(contact), &format!("wamid.m.{i}"), "quero marcar")
        })
        .collect();
    let rate = send(&server, spread).await;
    let distinct = TENANTS + (0..MESSAGES).filter(|i| (i * 7_919) % CONTACTS_PER_TENANT != 0).count();
    let done = drain(url, distinct as i64).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let peak = common::status_mb(server.pid, "VmHWM:");
    let settled = common::status_mb(server.pid, "VmRSS:");
    server.stop().await;
    let verdict = |mb: f64, limit: f64| if mb < limit { "met" } else { "missed" };
    format!(
        "| {name} | {TENANTS} | {CONVERSATIONS} | {seeded:.1} | {idle:.1} | {rss_tenants:.1} ({after_tenants} answered) | {peak:.1} | {settled:.1} | {done} of {distinct} answered; intake {rate:.0} msgs/s | idle {}, load {} |\n",
        verdict(idle, 50.0),
        verdict(peak, 150.0),
    )
}

#[tokio::main]
async fn main() {
    let mut header = common::machine();
    let mut table = String::from(
        "| backend | tenants | conversations | seeding s | idle RSS MB | RSS after one message per tenant MB | peak (VmHWM) MB | RSS after pause MB | turns | targets (< 50 idle, < 150 load) |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let dir = tempfile::tempdir().expect("dir");
    table += &run("SQLite", &format!("sqlite://{}/memory.db", dir.path().display())).await;
    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        header = format!("{header}; {}", common::postgres_settings(&admin).await);
        let url = common::fresh_database(&admin, &server, "balcao_bench_memory_pg").await;
        table += &run("PostgreSQL", &url).await;
        common::drop_database(&admin, "balcao_bench_memory_pg").await;
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{header}\n\n{table}");
}
