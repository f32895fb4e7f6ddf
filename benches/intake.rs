//! Webhook intake benchmark: the real server binary (a child process) under signed
//! one-message webhooks from 32 connections with 10% duplicates, twice: with one commit per
//! message (`BALCAO_INTAKE_BATCH_MAX=1`, the design before group commit, kept as the baseline)
//! and with group commit (the defaults). Beside them, the limit: the same rows written straight
//! into the database in batches, which is what the server's commits can at most reach.
//!
//! `cargo bench --bench intake` runs SQLite; set `BALCAO_BENCH_POSTGRES_URL` (a server URL; the
//! bench creates and drops the databases `balcao_bench_*`) to add PostgreSQL. Turn processing is
//! pushed out of the measurement window (a long debounce), so this measures intake alone.

#[path = "common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use balcao::domain::DatabaseUrl;
use balcao::inbound::TenantDirectory;
use balcao::store::{ConversationRef, IntakeStore, IntakeWrite, JobKind, Store, TenantStore, TurnTiming};
use balcao::tenant::TenantSpec;
use balcao::whatsapp::{ContactIdentity, InboundContent, NewInbound};
use chrono::{TimeDelta, Utc};
use common::{Server, Stats, drive, post, status_mb, webhook};

const CONNECTIONS: usize = 32;
/// Database connections of the server and of the direct run (the same for both).
fn pool_size() -> u32 {
    std::env::var("BENCH_POOL").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}

fn connections() -> usize {
    std::env::var("BENCH_CONNECTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(CONNECTIONS)
}
const MESSAGES: usize = 20_000;
/// Rows per transaction in the limit run (the server's default batch maximum).
const LIMIT_BATCH: usize = 64;
const DUPLICATE_EVERY: usize = 10;
const RATE_PER_SECOND: usize = 1_000;
const RATE_SECONDS: usize = 10;
const PHONE_NUMBER_ID: &str = "106540352242922";
/// What every message says.
const BODY: &str = "quero marcar um corte amanhã às 14h";

fn tenant_spec() -> TenantSpec {
    TenantSpec::parse(&format!(
        "name = \"Bench\"\nslug = \"bench\"\ntimezone = \"America/Sao_Paulo\"\n[whatsapp]\nphone_number_id = \"{PHONE_NUMBER_ID}\"\n"
    ))
    .expect("tenant spec")
}

/// The i-th message: every tenth repeats an earlier id (a redelivery).
fn wamid(run: &str, i: usize) -> String {
    let n = if i % DUPLICATE_EVERY == DUPLICATE_EVERY - 1 { i / 2 } else { i };
    format!("wamid.{run}.{n}")
}

/// Customers the messages come from.
const CONTACTS: usize = 5_000;

fn wa_id(i: usize) -> String {
    format!("55119{:08}", i % CONTACTS)
}

async fn fresh_store(url: &str) -> Store {
    let store = Store::connect(&DatabaseUrl::new(url), pool_size()).await.expect("connect");
    store.migrate().await.expect("migrate");
    store.apply_tenant(&tenant_spec(), Utc::now()).await.expect("tenant");
    store
}

/// The i-th message as the webhook parses it.
fn inbound(run: &str, i: usize) -> NewInbound {
    NewInbound {
        provider_message_id: wamid(run, i),
        contact: ContactIdentity {
            wa_id: Some(balcao::domain::PhoneE164::parse(&wa_id(i)).expect("phone")),
            user_id: None,
            username: None,
            profile_name: Some("Cliente".into()),
        },
        content: InboundContent::Text { body: BODY.into() },
        context_id: None,
        sent_at: None,
        raw: serde_json::json!({ "id": wamid(run, i) }),
        simulated_by: None,
        sender_hashes: Vec::new(),
    }
}

/// The limit: the same rows straight into the database in batches of [`LIMIT_BATCH`], from
/// `writers` tasks (as many as the server's writers). The contacts and conversations exist
/// before the clock starts, so this is the database's rate for these rows written in batches,
/// without HTTP and without the per-message contact read the server also does.
async fn limit(url: &str, writers: usize) -> Stats {
    let store = fresh_store(url).await;
    let tenant = TenantDirectory::default().by_phone_number_id(&store, PHONE_NUMBER_ID).await.expect("lookup");
    let tenant = tenant.expect("tenant").id;
    let timing = TurnTiming { debounce: TimeDelta::minutes(10), debounce_max: TimeDelta::minutes(20), max_attempts: 5 };
    let mut conversations = Vec::with_capacity(CONTACTS);
    for i in 0..CONTACTS {
        let contact = inbound("limit", i).contact;
        conversations.push(store.ensure_conversation(tenant, &contact, Utc::now()).await.expect("conversation"));
    }
    let conversations = Arc::new(conversations);
    common::analyze(url).await;
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..writers {
        let (store, next, timing, conversations) = (store.clone(), next.clone(), timing.clone(), conversations.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let first = next.fetch_add(LIMIT_BATCH, Ordering::Relaxed);
                if first >= MESSAGES {
                    return latencies;
                }
                let began = Instant::now();
                let writes: Vec<IntakeWrite> = (first..(first + LIMIT_BATCH).min(MESSAGES))
                    .map(|i| IntakeWrite::Message {
                        tenant,
                        conversation: ConversationRef::Known(conversations[i % CONTACTS]),
                        message: inbound("limit", i),
                        kind: JobKind::Turn,
                    })
                    .collect();
                let refs: Vec<&IntakeWrite> = writes.iter().collect();
                store.write_intake_batch(&refs, &timing, Utc::now()).await.expect("batch");
                latencies.extend(std::iter::repeat_n(began.elapsed(), writes.len()));
            }
        });
    }
    let mut latencies = Vec::with_capacity(MESSAGES);
    while let Some(l) = tasks.join_next().await {
        latencies.extend(l.expect("task"));
    }
    let stats = Stats { count: MESSAGES, elapsed: start.elapsed(), latencies };
    store.close().await;
    stats
}

/// One server process under the full-speed then the paced load.
struct ServerRun {
    http: Stats,
    paced: Stats,
    idle_rss_mb: f64,
    peak_rss_mb: f64,
    batches: BatchSizes,
}

/// `balcao_intake_batch_size` as scraped from `/metrics`.
struct BatchSizes {
    count: f64,
    sum: f64,
    /// (upper bound, cumulative count)
    buckets: Vec<(f64, f64)>,
}

impl BatchSizes {
    fn parse(text: &str) -> Self {
        let value = |line: &str| line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let mut sizes = BatchSizes { count: 0.0, sum: 0.0, buckets: Vec::new() };
        for line in text.lines() {
            if line.starts_with("balcao_intake_batch_size_count") {
                sizes.count = value(line);
            } else if line.starts_with("balcao_intake_batch_size_sum") {
                sizes.sum = value(line);
            } else if let Some(rest) = line.strip_prefix("balcao_intake_batch_size_bucket{le=\"") {
                let bound = rest.split('"').next().and_then(|b| b.parse::<f64>().ok()).unwrap_or(f64::INFINITY);
                sizes.buckets.push((bound, value(line)));
            }
        }
        sizes
    }

    /// The bucket bound under which a `q` share of the writes' batches fall (by batch).
    fn quantile(&self, q: f64) -> f64 {
        let target = self.count * q;
        self.buckets.iter().find(|(_, n)| *n >= target).map_or(f64::NAN, |(b, _)| *b)
    }

    fn describe(&self) -> String {
        if self.count == 0.0 {
            return String::new();
        }
        format!(
            "{:.0} commits, mean {:.1}, p50 ≤ {}, p99 ≤ {}",
            self.count,
            self.sum / self.count,
            self.quantile(0.5),
            self.quantile(0.99)
        )
    }
}

async fn run_server(url: &str, settings: &[(&str, String)], run: &str) -> ServerRun {
    fresh_store(url).await.close().await;
    let mut settings = settings.to_vec();
    settings.extend([
        ("BALCAO_DEBOUNCE_MS", "600000".to_owned()),
        ("BALCAO_DEBOUNCE_MAX_MS", "1200000".to_owned()),
        ("BALCAO_DB_MAX_CONNECTIONS", pool_size().to_string()),
    ]);
    let server = Server::start(url, &settings).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss_mb = status_mb(server.pid, "VmRSS:");

    let client = reqwest::Client::builder().pool_max_idle_per_host(CONNECTIONS).build().expect("client");
    let bodies: Arc<Vec<(Vec<u8>, String)>> = Arc::new(
        (0..MESSAGES + RATE_PER_SECOND * RATE_SECONDS)
            .map(|i| webhook(PHONE_NUMBER_ID, &wa_id(i), &wamid(run, i), BODY))
            .collect(),
    );
    let send = {
        let (client, bodies, base) = (client.clone(), bodies.clone(), server.base.clone());
        move |i: usize| {
            let (client, bodies, base) = (client.clone(), bodies.clone(), base.clone());
            async move { post(&client, &base, &bodies[i]).await }
        }
    };
    // Warm-up, off the clock: one message from every customer, so the timed runs see the steady
    // state of a business whose customers are known, then the planner's statistics (this
    // host's PostgreSQL runs without autovacuum, which in production would gather them within a
    // minute; plans cached while the tables were empty would otherwise scan them for good).
    let warm: Arc<Vec<(Vec<u8>, String)>> = Arc::new(
        (0..CONTACTS).map(|i| webhook(PHONE_NUMBER_ID, &wa_id(i), &format!("wamid.{run}.warm.{i}"), BODY)).collect(),
    );
    drive(CONTACTS, connections(), None, {
        let (client, base) = (client.clone(), server.base.clone());
        move |i| {
            let (client, warm, base) = (client.clone(), warm.clone(), base.clone());
            async move { post(&client, &base, &warm[i]).await }
        }
    })
    .await;
    common::analyze(url).await;
    let http = drive(MESSAGES, connections(), None, send.clone()).await;
    let paced =
        drive(RATE_PER_SECOND * RATE_SECONDS, connections(), Some(RATE_PER_SECOND), move |i| send(MESSAGES + i)).await;
    let peak_rss_mb = status_mb(server.pid, "VmHWM:");
    let metrics =
        client.get(format!("{}/metrics", server.base)).send().await.expect("metrics").text().await.expect("text");
    server.stop().await;
    ServerRun { http, paced, idle_rss_mb, peak_rss_mb, batches: BatchSizes::parse(&metrics) }
}

async fn bench_backend(name: &str, writers: usize, make_url: impl Fn(&str) -> String) -> String {
    let limit = limit(&make_url("limit"), writers).await;
    let baseline = run_server(&make_url("baseline"), &[("BALCAO_INTAKE_BATCH_MAX", "1".into())], "baseline").await;
    let grouped = run_server(&make_url("grouped"), &[("BALCAO_INTAKE_WRITERS", writers.to_string())], "grouped").await;
    let row = |what: &str, stats: &Stats, vs: String, extra: String| {
        format!(
            "| {name} | {what} | {:.0} | {:.2} | {:.2} | {vs} | {extra} |\n",
            stats.throughput(),
            stats.ms(0.5),
            stats.ms(0.99),
        )
    };
    let rss = |run: &ServerRun| format!("idle {:.1} MB, peak {:.1} MB", run.idle_rss_mb, run.peak_rss_mb);
    let of_limit = |stats: &Stats| format!("{:.0}% of limit", stats.throughput() / limit.throughput() * 100.0);
    let mut out = row(
        &format!("limit: rows in batches of {LIMIT_BATCH}, {writers} writer(s)"),
        &limit,
        String::new(),
        String::new(),
    );
    out += &row("one commit per message, max rate", &baseline.http, of_limit(&baseline.http), String::new());
    out += &row(
        &format!("one commit per message, paced {RATE_PER_SECOND}/s"),
        &baseline.paced,
        String::new(),
        rss(&baseline),
    );
    out += &row(
        "group commit, max rate",
        &grouped.http,
        format!(
            "{}; {:.1}× one-commit",
            of_limit(&grouped.http),
            grouped.http.throughput() / baseline.http.throughput()
        ),
        grouped.batches.describe(),
    );
    out += &row(&format!("group commit, paced {RATE_PER_SECOND}/s"), &grouped.paced, String::new(), rss(&grouped));
    out
}

#[tokio::main]
async fn main() {
    let mut table = String::from(
        "| backend | what | msgs/s | p50 ms | p99 ms | vs | batches / RSS |\n|---|---|---|---|---|---|---|\n",
    );
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().to_owned();
    // SQLite has one writing connection: one writer.
    table += &bench_backend("SQLite", 1, |which| format!("sqlite://{}/{which}.db", root.display())).await;

    if let Ok(server) = std::env::var("BALCAO_BENCH_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("postgres");
        let base = server.rsplit_once('/').map(|(b, _)| b.to_owned()).expect("url with a database");
        for which in ["limit", "baseline", "grouped"] {
            let db = format!("balcao_bench_{which}");
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}")))
                .execute(&admin)
                .await
                .expect("drop");
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&admin).await.expect("create");
        }
        // The server's default number of writers on PostgreSQL.
        let writers = std::env::var("BENCH_WRITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
        table += &bench_backend("PostgreSQL", writers, |which| format!("{base}/balcao_bench_{which}")).await;
    } else {
        eprintln!("PostgreSQL skipped: set BALCAO_BENCH_POSTGRES_URL to include it");
    }
    println!("\n{table}");
}
