//! `chaos`: the fault-injection campaign. Real server processes (this binary as `chaos __serve`,
//! the same `App` as `balcao serve`), one real database, and loopback fakes for the model, the
//! Graph API and the Pix provider; each run plays a randomized script with faults and checks
//! the invariants from the database and the fakes' own records.
//!
//! ```text
//! cargo run --release --bin chaos -- --runs 1000 --db postgres --processes 3 [--seed S]
//! ```
//!
//! Run `i` of a campaign with seed `S` has seed `S + i`; a violation prints the command that
//! replays its run alone. A replay plays the same script with the same faults of its own (Graph
//! API answers, the provider's, kills and freezes, deliveries); the model's random errors, which
//! process takes each webhook, thread timing and other runs' faults are not replayed.
//!
//! Invariants are in `invariants.rs`. A campaign of 20 runs or more also fails when its runs
//! stopped reaching a path (no booking, cancellation, paid charge or reply at all), so a broken
//! script cannot pass on empty tables.

mod cluster;
mod db;
mod faults;
mod graph;
mod invariants;
mod meta;
mod model;
mod psp;
mod rng;
mod run;
mod sabotage;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use futures::StreamExt;

use crate::cluster::Cluster;
use crate::db::Db;
use crate::faults::{Coverage, Fault, Faults};
use crate::meta::Meta;
use crate::psp::fake_asaas::{API_KEY, WEBHOOK_TOKEN};
use crate::run::Ctx;

/// The servers' job and ledger leases: the shortest the configuration allows, so a frozen or
/// killed process is taken over within a run.
const LEASE: Duration = Duration::from_secs(3);
/// How long a send whose outcome is unknown waits for Meta's status before it goes again:
/// longer than any outage a run injects (a frozen process, a restart).
pub const OUTBOX_GRACE: Duration = Duration::from_secs(20);
/// Runs in flight up to which each run draws its process faults at full probability.
const FAULT_PARALLEL: f64 = 12.0;
/// How long a run may take to settle once its script is played: past the longest delay the
/// design allows, a payment look claimed by a process killed mid-look (the claim's 90 s lease).
const SETTLE: Duration = Duration::from_secs(150);

/// The servers' WhatsApp access token (the fake Graph API takes any).
pub const SERVER_ACCESS_TOKEN: &str = "chaos-access-token";

/// How often a PostgreSQL campaign vacuums its database when the server's autovacuum is off.
const VACUUM_EVERY: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Parser)]
#[command(about = "Fault-injection campaign against real balcao processes")]
struct Args {
    /// How many runs.
    #[arg(long, default_value_t = 100)]
    runs: u64,
    #[arg(long, value_enum, default_value = "sqlite")]
    db: Backend,
    /// The campaign's seed (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Server processes sharing the database (PostgreSQL only for more than one).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// Runs in flight at once (each its own business). Above 12, each run draws its process
    /// faults with 12/parallel of the probability: a kill hits every run in flight, so each
    /// run still lives through as many as at 12 (the report says how many).
    #[arg(long, default_value_t = 3)]
    parallel: usize,
    /// The PostgreSQL server; the campaign creates and drops a database of its own on it.
    #[arg(long, env = "BALCAO_TEST_POSTGRES_URL", default_value = "postgres://postgres@127.0.0.1:5432/test")]
    postgres_url: String,
    /// The share of model calls answered 429, 529 or 500.
    #[arg(long, default_value_t = 0.05)]
    model_error_rate: f64,
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if std::env::args().nth(1).as_deref() == Some("__serve") {
        return runtime.block_on(cluster::serve());
    }
    let args = Args::parse();
    if args.processes > 1 && matches!(args.db, Backend::Sqlite) {
        anyhow::bail!("--processes above 1 needs --db postgres (SQLite is one process's database)");
    }
    let ok = runtime.block_on(campaign(args))?;
    std::process::exit(if ok { 0 } else { 1 });
}

async fn campaign(args: Args) -> anyhow::Result<bool> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let dir = std::env::temp_dir().join(format!("balcao-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (url, admin) = database(&args, &dir).await?;
    let outcome = play_campaign(&args, seed, &url, &dir).await;
    // The campaign's database goes, unless it holds violations to look at.
    if !matches!(outcome, Ok(false))
        && let Some((admin, name)) = admin
    {
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
            .execute(&admin)
            .await;
    }
    let ok = outcome?;
    if ok {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("server logs: {}; database: {url}", dir.display());
    }
    Ok(ok)
}

async fn play_campaign(args: &Args, seed: u64, url: &str, dir: &std::path::Path) -> anyhow::Result<bool> {
    let store = open_store(url).await?;
    store.migrate().await.context("migrations")?;
    let db = Db::connect(url).await?;
    let vacuum = db.vacuum_every(VACUUM_EVERY).await?;
    let faults = Faults::default();
    let (graph, statuses) = graph::FakeGraph::start().await?;
    let model = model::FakeModel::start(seed, args.model_error_rate, faults.clone()).await?;
    let env = server_env(url, &graph.url, &model.url);
    let cluster = Arc::new(Cluster::start(args.processes, env, dir.to_owned()).await?);
    let meta = Arc::new(Meta::new(cluster.clone(), seed)?);
    tokio::spawn(report_statuses(meta.clone(), statuses, faults.clone(), seed));
    let ctx = Ctx {
        meta,
        graph,
        model,
        store,
        db,
        faults,
        coverage: Coverage::default(),
        share: (FAULT_PARALLEL / args.parallel.max(1) as f64).min(1.0),
        http: reqwest::Client::new(),
    };

    println!(
        "chaos: {} runs on {:?} with {} process(es), {} at once, seed {seed}",
        args.runs, args.db, args.processes, args.parallel
    );
    let started = Instant::now();
    let mut failed = 0u64;
    let mut done = 0u64;
    let mut durations = Vec::new();
    let mut lived = Vec::new();
    let mut results = futures::stream::iter(0..args.runs)
        .map(|i| {
            let ctx = &ctx;
            let cluster = &cluster;
            async move {
                let (start, faults) = (Instant::now(), ctx.faults.process_faults());
                let result = one_run(ctx, cluster, i, seed.wrapping_add(i)).await;
                (i, result, start.elapsed(), ctx.faults.process_faults() - faults)
            }
        })
        .buffer_unordered(args.parallel.max(1));
    while let Some((i, result, took, faults)) = results.next().await {
        done += 1;
        durations.push(took);
        lived.push(faults);
        let violations = result.unwrap_or_else(|e| vec![format!("the run itself failed: {e:#}")]);
        if !violations.is_empty() {
            failed += 1;
            println!("VIOLATION in run {i} (seed {}):", seed.wrapping_add(i));
            for v in &violations {
                println!("  - {v}");
            }
            println!("  replay: {}", replay(args, seed.wrapping_add(i)));
        }
        if done.is_multiple_of(100) {
            println!("  {done} runs, {failed} with violations, {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    drop(results);
    if let Some(vacuum) = vacuum {
        vacuum.abort();
    }
    let elapsed = started.elapsed();
    cluster.shutdown().await;
    let coverage = ctx.coverage.snapshot();
    let timing = Timing { elapsed, durations: &mut durations, lived: &mut lived };
    report(args, seed, (done, failed), timing, &ctx.faults.snapshot(), &coverage);
    ctx.store.close().await;
    // A campaign whose runs stopped reaching the paths it claims to test proves nothing.
    // Late in São Paulo's evening no booking can start exactly a reminder's offset ahead, so
    // a campaign run then has no reminder to answer.
    let reminders_possible = run::reminder_start(chrono::Utc::now())?.is_some();
    let unexercised: Vec<&str> = COVERED
        .iter()
        .copied()
        .filter(|what| reminders_possible || *what != "reminders answered")
        .filter(|what| coverage.get(what).copied().unwrap_or(0) == 0)
        .collect();
    if done >= 20 && !unexercised.is_empty() {
        println!("NOT EXERCISED in {done} runs: {}", unexercised.join(", "));
        return Ok(false);
    }
    Ok(failed == 0)
}

/// What every campaign of 20 runs or more must have done at least once.
const COVERED: [&str; 10] = [
    "appointments booked",
    "appointments cancelled",
    "charges paid",
    "deposits paid",
    "charges withdrawn",
    "refunds done",
    "reminders answered",
    "expired clicks refused",
    "replies sent",
    "customers erased",
];

/// The command that plays run seed `run_seed` alone, with the campaign's settings.
fn replay(args: &Args, run_seed: u64) -> String {
    format!(
        "cargo run --release --bin chaos -- --runs 1 --parallel 1 --db {} --processes {} --model-error-rate {} --seed {run_seed}",
        format!("{:?}", args.db).to_lowercase(),
        args.processes,
        args.model_error_rate
    )
}

async fn one_run(ctx: &Ctx, cluster: &Cluster, index: u64, seed: u64) -> anyhow::Result<Vec<String>> {
    let cast = run::Cast::create(ctx, index, seed).await?;
    let result = play_and_check(ctx, cluster, &cast, seed).await;
    // Whatever happened, the fakes forget this run.
    ctx.graph.forget(&cast.number);
    ctx.meta.take_acked(&cast.number);
    let model = ctx.model.take_violations(&format!("Chaos run {index}"));
    let mut violations = result?;
    violations.extend(model);
    Ok(violations)
}

async fn play_and_check(ctx: &Ctx, cluster: &Cluster, cast: &run::Cast, seed: u64) -> anyhow::Result<Vec<String>> {
    let sabotage = sabotage::Sabotage { cluster, db: &ctx.db, faults: &ctx.faults, lease: LEASE, share: ctx.share };
    let plan = rng::Rng::new(seed ^ 0x5AB0_7A6E);
    let (problems, sabotaged) = futures::future::join(run::play(ctx, cast, seed), sabotage.play(plan)).await;
    sabotaged?;
    let mut violations = problems?;
    if let Some(stuck) = invariants::settle(ctx, cast, SETTLE).await? {
        violations.push(stuck);
    }
    let acked = ctx.meta.take_acked(&cast.number);
    violations.extend(invariants::check(ctx, cast, &acked).await?);
    Ok(violations)
}

/// Meta's `sent` status for every accepted message, after a short delay, sometimes twice.
async fn report_statuses(
    meta: Arc<Meta>,
    mut statuses: tokio::sync::mpsc::UnboundedReceiver<graph::StatusNote>,
    faults: Faults,
    seed: u64,
) {
    let mut rng = rng::Rng::new(seed ^ 0x57A7);
    while let Some((number, wamid, to, key)) = statuses.recv().await {
        let (delay, twice) = (rng.below(200), rng.chance(0.1));
        if twice {
            faults.add(Fault::DuplicateStatus);
        }
        let meta = meta.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let body = meta::status(&number, &wamid, &to, key.as_deref());
            meta.deliver(&body).await;
            if twice {
                meta.deliver(&body).await;
            }
        });
    }
}

/// The campaign's database URL, and for PostgreSQL the admin pool and name to drop it with.
async fn database(args: &Args, dir: &std::path::Path) -> anyhow::Result<(String, Option<(sqlx::PgPool, String)>)> {
    match args.db {
        Backend::Sqlite => Ok((format!("sqlite://{}?mode=rwc", dir.join("chaos.db").display()), None)),
        Backend::Postgres => {
            let admin = sqlx::PgPool::connect(&args.postgres_url)
                .await
                .with_context(|| format!("PostgreSQL at {}", args.postgres_url))?;
            let name = format!("balcao_chaos_{}", std::process::id());
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                .execute(&admin)
                .await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await?;
            // The same server and options, another database.
            let (address, query) = args.postgres_url.split_once('?').unwrap_or((&args.postgres_url, ""));
            let base = address.rsplit_once('/').map_or(address, |(b, _)| b);
            let query = if query.is_empty() { String::new() } else { format!("?{query}") };
            Ok((format!("{base}/{name}{query}"), Some((admin, name))))
        }
    }
}

async fn open_store(url: &str) -> anyhow::Result<balcao::store::Store> {
    let store = if url.starts_with("postgres") {
        let options = sqlx::postgres::PgConnectOptions::from_str(url)?.application_name(db::CAMPAIGN);
        balcao::store::Store::connect_postgres(options, 4).await?
    } else {
        balcao::store::Store::connect_sqlite(sqlx::sqlite::SqliteConnectOptions::from_str(url)?, 4).await?
    };
    Ok(store)
}

fn server_env(database_url: &str, graph: &str, model: &str) -> Vec<(String, String)> {
    let lease = LEASE.as_secs().to_string();
    let grace = OUTBOX_GRACE.as_secs().to_string();
    [
        ("DATABASE_URL", database_url),
        ("WHATSAPP_APP_SECRET", meta::APP_SECRET),
        ("WHATSAPP_ACCESS_TOKEN", SERVER_ACCESS_TOKEN),
        ("WHATSAPP_API_URL", graph),
        ("AGENT", "anthropic"),
        ("ANTHROPIC_API_KEY", "chaos-model-key"),
        ("ANTHROPIC_BASE_URL", model),
        ("ASAAS_API_KEY", API_KEY),
        ("ASAAS_WEBHOOK_TOKEN", WEBHOOK_TOKEN),
        ("BALCAO_DEBOUNCE_MS", "0"),
        // A provider holding its answer holds a worker for the tenant's Pix timeout (5 s in
        // the campaign's tenant files); with many runs in flight, four workers would queue
        // every other run's turns behind it.
        ("BALCAO_WORKERS", "16"),
        ("BALCAO_POLL_INTERVAL_MS", "100"),
        ("BALCAO_JOB_LEASE_SECONDS", &lease),
        ("BALCAO_LEDGER_LEASE_SECONDS", &lease),
        ("BALCAO_JOB_BACKOFF_BASE_MS", "50"),
        ("BALCAO_JOB_BACKOFF_MAX_SECONDS", "1"),
        ("BALCAO_JOB_MAX_ATTEMPTS", "10"),
        ("BALCAO_HTTP_TIMEOUT_SECONDS", "1"),
        ("BALCAO_LLM_TIMEOUT_SECONDS", "2"),
        ("BALCAO_OUTBOX_GRACE_SECONDS", &grace),
        ("BALCAO_SHUTDOWN_GRACE_SECONDS", "5"),
        ("BALCAO_DB_MAX_CONNECTIONS", "8"),
        // Warnings name what a fault did (a lost lease, a retried send) in `server-N.log`.
        ("RUST_LOG", "warn"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// How long the campaign and its runs took, and how many process faults each run lived through.
struct Timing<'a> {
    elapsed: Duration,
    durations: &'a mut [Duration],
    lived: &'a mut [u64],
}

/// The value at quantile `q` of sorted `values`.
fn quantile<T: Copy>(values: &[T], q: f64) -> Option<T> {
    values.get(((values.len() as f64 * q) as usize).min(values.len().saturating_sub(1))).copied()
}

fn report(
    args: &Args,
    seed: u64,
    (runs, failed): (u64, u64),
    Timing { elapsed, durations, lived }: Timing<'_>,
    faults: &BTreeMap<Fault, u64>,
    coverage: &BTreeMap<&'static str, u64>,
) {
    durations.sort();
    lived.sort();
    let at = |q: f64| quantile(durations, q);
    let secs = |d: Option<Duration>| d.map_or(0.0, |d| d.as_secs_f64());
    println!("\n| campaign | value |\n|---|---|");
    println!("| database | {:?}, {} process(es), {} runs at once |", args.db, args.processes, args.parallel);
    println!("| seed | {seed} |");
    println!("| runs | {runs} |");
    println!("| runs with a violation | {failed} |");
    println!("| duration | {:.0} s ({:.2} runs/s) |", elapsed.as_secs_f64(), runs as f64 / elapsed.as_secs_f64());
    println!(
        "| run duration | p50 {:.1} s, p90 {:.1} s, max {:.1} s |",
        secs(at(0.5)),
        secs(at(0.9)),
        secs(durations.last().copied())
    );
    println!(
        "| process faults lived through per run | mean {:.1}, p50 {}, p90 {}, max {} |",
        lived.iter().sum::<u64>() as f64 / lived.len().max(1) as f64,
        quantile(lived, 0.5).unwrap_or(0),
        quantile(lived, 0.9).unwrap_or(0),
        lived.last().copied().unwrap_or(0)
    );
    println!("\n| fault injected | count |\n|---|---|");
    for (fault, n) in faults {
        println!("| {fault:?} | {n} |");
    }
    println!("\n| done by the runs | count |\n|---|---|");
    for (what, n) in coverage {
        println!("| {what} | {n} |");
    }
}
